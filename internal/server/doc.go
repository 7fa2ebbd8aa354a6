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
// [Server]'s fields are its parts; each part is owned by a group of files:
//
//   - Lifecycle: Open's steps, Close's order and the routes (server.go);
//     the background loops, the background lock and the one close
//     (lifecycle.go).
//   - HTTP and authz: the socket and its connections (listen.go, conns.go,
//     peer.go, sockpeer_linux.go), the caller's rights (authz.go,
//     selfclose.go), bodies and their decoding (body.go, decode.go), errors
//     (errors.go), the quotas per uid (quota.go), the wire types' names
//     (api.go; the types are package api's).
//   - Sessions: the registry, its lock and index of roots (registry.go);
//     sessions, their roots, keeps, owners and ends (sessions.go, roots.go,
//     keeps.go, owner.go, ends.go, runs.go, holders.go, why.go); the
//     recovered session (recovered.go); the arms and their cookies
//     (arms.go).
//   - The store: the files are package store's (a locked state directory,
//     its snapshot and journal); what a save takes from the registry, the
//     save loop and the restore are the server's (state.go).
//   - Events: the hub and the event streams (events.go, causal.go,
//     streamend.go), the loss watcher (losses.go), the session records
//     (records.go).
//   - Metrics: the /metrics series and their listeners (metrics.go,
//     metrics_state.go).
package server
