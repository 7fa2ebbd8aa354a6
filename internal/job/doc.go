// Package job is one job of `lineage run`, from its start to its report,
// whichever tracker it runs under: its root as lineage's child ([Root]:
// started in its own process group and the terminal's foreground, waited
// for, the signals lineage gets passed on to it by identity, its
// deadline), the signals lineage catches meanwhile ([Signals]), how the
// root ended and the exit status that makes ([End]), and what the run says
// ([Report]: the reaper's outcomes, the leftovers, the losses; its text
// for people, its JSON file, the status --strict gives an incomplete one).
//
// [RunRemote] runs a job under the daemon's tracker, reached through a
// [Runner]; package tracker runs one under a tracker of lineage's own,
// with the same Root, Signals and Report. The package links no backend, so
// the front runs a job through the daemon itself.
//
// A Root and the Signals are used by one goroutine; [RunRemote] makes the
// calling process a child subreaper that waits for all its children, so a
// process runs one job at a time. A Report is not safe for concurrent use;
// once complete, it may be shared for reading.
package job
