package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/lineage"
)

func newCmdRootsShow(s cli.Streams) *cobra.Command {
	return newCmdOnRoot(s, "show PID@START", "Show a root's live tree", (*client.Client).Root, func(w io.Writer, out api.Root) {
		linef(w, "root %s (session %s) %s", out.Root, out.Session, shown(out.Label))
		printTree(w, out.Members)
	})
}

// printTree prints members indented under their lineage parents; those
// whose parent is not a live member start at the top.
func printTree(w io.Writer, ms []api.Member) {
	live := make(map[lineage.Identity]bool, len(ms))
	kids := make(map[lineage.Identity][]api.Member)
	for _, m := range ms {
		live[m.Process] = true
	}
	var tops []api.Member
	for _, m := range ms {
		if live[m.Parent] && m.Parent != m.Process {
			kids[m.Parent] = append(kids[m.Parent], m)
		} else {
			tops = append(tops, m)
		}
	}
	var walk func(m api.Member, depth int)
	walk = func(m api.Member, depth int) {
		linef(w, "%s%s\t%s", strings.Repeat("  ", depth+1), m.Process, lineage.CommandLine(m.Argv, m.Comm))
		for _, k := range kids[m.Process] {
			walk(k, depth+1)
		}
	}
	for _, m := range tops {
		walk(m, 0)
	}
}
