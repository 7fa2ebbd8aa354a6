package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/server"
)

func newCmdRootsShow(s streams) *cobra.Command {
	o := &clientOptions{s: s}
	cmd := &cobra.Command{
		Use:   "show PID@START",
		Short: "Show a root's live tree",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := lineage.ParseIdentity(args[0])
			if err != nil {
				return err
			}
			var out server.Root
			return o.call(cmd.Context(), "GET", "/v1/roots/"+id.String(), nil, &out, func(w io.Writer) {
				linef(w, "root %s (session %s) %s", out.Root, out.Session, out.Label)
				printTree(w, out.Members)
			})
		},
	}
	o.flags(cmd)
	return cmd
}

// printTree prints members indented under their lineage parents; those
// whose parent is not a live member start at the top.
func printTree(w io.Writer, ms []server.Member) {
	live := make(map[lineage.Identity]bool, len(ms))
	kids := make(map[lineage.Identity][]server.Member)
	for _, m := range ms {
		live[m.Process] = true
	}
	var tops []server.Member
	for _, m := range ms {
		if live[m.Parent] && m.Parent != m.Process {
			kids[m.Parent] = append(kids[m.Parent], m)
		} else {
			tops = append(tops, m)
		}
	}
	var walk func(m server.Member, depth int)
	walk = func(m server.Member, depth int) {
		linef(w, "%s%s\t%s", strings.Repeat("  ", depth+1), m.Process, strings.Join(m.Argv, " "))
		for _, k := range kids[m.Process] {
			walk(k, depth+1)
		}
	}
	for _, m := range tops {
		walk(m, 0)
	}
}
