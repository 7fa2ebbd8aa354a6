package loader

import "github.com/lineage-dev/lineage/internal/lineage"

// Inspector is a [Backend] that reads, in one call, what /proc/PID/stat
// shows of many processes: the reaper's check of a wide lineage then costs
// one system call rather than a file per member (reap.Options.Inspect).
type Inspector interface {
	// Inspect fills out[i] (out as long as pids) with what /proc/PID/stat
	// shows of pids[i] at the call, PGRP and Session excepted; a pid that
	// no process has gets a zero Stat. Pids are those of the initial pid
	// namespace. It is safe for concurrent use.
	Inspect(pids []uint32, out []lineage.Stat) error
	// Inspects reports whether Inspect works here, and if not, why.
	Inspects() (bool, string)
}
