// Package fastexec is `lineage exec`'s fast path, linked into a binary
// built with cgo (the front, as `make build` builds it).
//
// `lineage exec --session S -- COMMAND` registers its own process as a root
// over the daemon's socket and then execve(2)s COMMAND. In Go that costs
// the runtime's start (about 2 ms here) and an execve from a process of
// several threads (about 1 ms more than from one); the target is
// 5 ms over COMMAND alone. So a constructor in C does the same work before
// the runtime starts, while the process has one thread: it reads the
// command line as cobra would, finds COMMAND as exec.LookPath would, reads
// the process's start time from /proc/self/stat, sends the same
// `POST /v1/roots` on a connection of its own, and on a 2xx answer
// execve(2)s COMMAND. The pid and start time are the same as Go's path
// registers: the gap-free guarantee is unchanged.
//
// It takes only the plain command line: --session, --kind, --label and
// --socket, each as --flag VALUE or --flag=VALUE, then COMMAND. Everything
// else returns to Go's `lineage exec` before anything is sent: --json,
// --help, --join, any other flag, a COMMAND not found or found through a
// relative $PATH entry, an argument that isn't UTF-8, a socket path that
// won't fit or is abstract, $LINEAGE_CPUPROFILE or $LINEAGE_BLOCKPROFILE set. After
// the request is sent, an answer that isn't 2xx (or none) returns to Go's
// path too: the daemon changed nothing on a refusal, so Go's path sends the
// request again and prints the daemon's own message, with the exit status
// it always had. Only where the connection breaks after the request went
// out may the daemon have registered the process unseen; Go's request then
// gets 409 (already a root) and runs nothing. An execve that fails after
// the registration is reported as Go's path reports it ("lineage: exec
// COMMAND: REASON", exit status 126).
//
// A binary built without cgo has no fast path: [Linked] is false and Go's
// path runs every `lineage exec`.
package fastexec
