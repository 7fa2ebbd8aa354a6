package main

import (
	"io"
	"strings"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/lineage"
)

// printEnded prints what a turn end, a close or a report did, child
// sessions first.
func printEnded(w io.Writer, e api.Ended) {
	for _, c := range e.Children {
		printEnded(w, c)
	}
	linef(w, "session %s (%s): %s, reaping %s", e.Session, e.Kind, e.Event, e.Reaping)
	for _, r := range e.Roots {
		linef(w, "  root %s %s: %s", r.Root, shown(r.Label), r.Decision)
		for _, o := range r.Outcomes {
			linef(w, "    %s\t%s\t%s\t%s", o.Process, o.Result, strings.Join(o.Signals, "→"), lineage.CommandLine(o.Argv, ""))
		}
		for _, warn := range r.Warnings {
			linef(w, "    warning: %s", shown(warn))
		}
	}
}
