package main

// lineage is built twice from this one command tree. Built plainly, it is
// one complete binary that runs every command in-process. Built with the
// lean tag (`make build`), it is the front: it links no BPF loader, no
// procfs, no Prometheus client, so that `lineage exec` and the other
// client commands start fast and small, and it execve(2)s the full binary,
// lineage-tracker, found beside its own executable, for the heavy
// commands below (tracker_lean.go), with the same arguments and pid.

// trackerBinary is the full binary's file name, beside the front's.
const trackerBinary = "lineage-tracker"

// The heavy commands' one-line help, the same in both builds.
const (
	runShort      = "Run a command and end everything it started when it is done"
	serveShort    = "Run the sidecar: the host's one tracker behind an HTTP/JSON API on a Unix socket"
	doctorShort   = "Check what this machine allows, and which backend lineage will use"
	reportShort   = "Render a forensic record: who spawned what, how it ended, what leaked"
	guardianShort = "Reap a job's lineage if the lineage run that started it dies (internal)"
)

// guardianCommand is the hidden subcommand `lineage run` starts as its
// guardian (see internal/guardian).
const guardianCommand = "guardian"
