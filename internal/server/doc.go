// Package server is the sidecar behind `lineage serve`: an HTTP/JSON API on
// a Unix socket (paths under /v1/) in front of the host's one tracker.
//
// Callers are authorised by the uid the kernel reports for the socket's
// peer (SO_PEERCRED), never by pid or start time: uid 0 may do anything;
// any other uid may register only processes whose real uid is its own, and
// may see, keep, end or close only the sessions it opened. A caller that is
// itself a member of a tracked lineage may register and read, but may not
// untrack, keep, remove a keep, end or close anything, in any session: a
// job can't free itself, nor end another session of the same uid. Reaping on
// behalf of a caller never signals what that caller could not signal with
// kill(2); such processes are reported instead.
//
// Sessions, roots and keeps are kept in a state directory, a snapshot and
// an append-only journal of the changes after it (state.go, journal.go),
// saved after every change and read back when the server starts. A [Server] is
// safe for concurrent use by multiple goroutines.
package server
