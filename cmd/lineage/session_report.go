package main

import (
	"io"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
)

func newCmdSessionReport(s streams) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   "report S",
		Short: "List a session's live processes without touching them",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out api.Ended
			return o.call(cmd.Context(), "GET", "/v1/sessions/"+url.PathEscape(args[0])+"/report", nil, &out, func(w io.Writer) { printEnded(w, out) })
		},
	}
	o.flags(cmd)
	return cmd
}
