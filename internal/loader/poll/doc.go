// Package poll is the /proc backend, for where BPF can't load: a [Poller]
// scans /proc and derives forks, execs and exits by difference (the pure
// diff core in diff.go; the scanning around it is thin). It keeps each
// process's stat file open between scans, so a reused pid can't answer for
// the process it had, and it makes its caller's orphans findable by being
// used with a child subreaper ([ChildReaper]). What a poller can't see, it
// says: a process that lives and dies between two scans is missing from
// the record; a double fork that completes inside one scan interval
// outside a subreaper escapes.
package poll
