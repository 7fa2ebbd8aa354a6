package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/server"
)

func newCmdRootsShow(s streams) *cobra.Command {
	return newCmdOnRoot(s, "show PID@START", "Show a root's live tree", "GET", func(w io.Writer, out server.Root) {
		linef(w, "root %s (session %s) %s", out.Root, out.Session, shown(out.Label))
		printTree(w, out.Members)
	})
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
		linef(w, "%s%s\t%s", strings.Repeat("  ", depth+1), m.Process, shown(m.Argv...))
		for _, k := range kids[m.Process] {
			walk(k, depth+1)
		}
	}
	for _, m := range tops {
		walk(m, 0)
	}
}
