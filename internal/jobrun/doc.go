// Package jobrun is the part of `lineage run` that needs no tracker of
// lineage's own: a job's root as lineage's child ([Root]: started in its
// own process group and the terminal's foreground, waited for, the signals
// lineage gets passed on to it by identity, its deadline), the signals
// lineage catches meanwhile, how the root ended and the exit status that
// makes, and [RunRemote], a job run under the daemon's tracker. Package
// job's standalone runner uses the same Root and signals. It links no
// backend, no /proc library and no metrics, so the lean front binary runs
// a job through the daemon itself.
//
// A Root and the Signals are used by one goroutine; [RunRemote] makes the
// calling process a child subreaper that waits for all its children, so a
// process runs one job at a time.
package jobrun
