package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
)

func newCmdSessionLs(s streams) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the sessions the caller may see",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var out []api.Session
			return o.call(cmd.Context(), "GET", "/v1/sessions", nil, &out, func(w io.Writer) {
				for _, se := range out {
					linef(w, "%s\t%s\t%d roots\t%s", se.ID, se.Kind, len(se.Roots), se.Label)
				}
			})
		},
	}
	o.flags(cmd)
	return cmd
}
