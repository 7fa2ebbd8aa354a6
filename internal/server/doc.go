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
// an append-only journal of the changes after it (package store), saved
// after every change and read back when the server starts. A [Server] is
// safe for concurrent use by multiple goroutines.
//
// # Parts
//
// [Server]'s fields are its parts (server.go); each part is owned by a
// group of files, named by its prefix:
//
//   - server*.go, the lifecycle: Open's steps, Close's order and the
//     routes (server.go); the background loops, the background lock and
//     the one close (server_lifecycle.go).
//   - http_*.go, HTTP and authz: the socket and its connections, the
//     caller's credentials and rights, request bodies and their decoding,
//     errors, the quotas per uid, the wire types' names (package api's).
//   - sessions*.go, the sessions: the registry, its lock and its index of
//     roots (sessions_registry.go); sessions, their roots, keeps (and the
//     kernel's copy of them), owners, ends and holders; the recovered
//     session; the arms and their cookies.
//   - store.go and package store, the store: the files are package
//     store's (a locked state directory, its snapshot and journal); what a
//     save takes from the registry, the save loop and the restore are the
//     server's (store.go).
//   - events*.go, the events: the hub and the event streams, the loss
//     watcher, the session records.
//   - metrics*.go, the metrics: the /metrics series and their listeners.
package server
