package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/lineage"
)

func newCmdSessionLs(s cli.Streams) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the sessions the caller may see",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return answer(cmd.Context(), o, (*client.Client).Sessions, func(w io.Writer, out []api.Session) {
				for _, se := range out {
					linef(w, "%s\t%s\t%d %s\t%s", se.ID, se.Kind, len(se.Roots), lineage.Plural(len(se.Roots), "root", "roots"), shown(se.Label))
				}
			})
		},
	}
	o.flags(cmd)
	return cmd
}
