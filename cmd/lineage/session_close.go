package main

import (
	"io"
	"net/url"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
)

func newCmdSessionClose(s streams) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   "close S",
		Short: "Close a session (its child sessions first): policy reaps its roots, then they are untracked",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var out api.Ended
			return o.call(cmd.Context(), "POST", "/v1/sessions/"+url.PathEscape(args[0])+"/close", nil, &out, func(w io.Writer) { printEnded(w, out) })
		},
	}
	o.flags(cmd)
	return cmd
}
