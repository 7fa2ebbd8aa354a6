// Package pidfd signals processes through pidfds: [Open] pins a process,
// [Send] signals the process a pidfd pins, and [Signal] sends one signal
// to an identity, checking its start time after the pin, so a recycled pid
// is never hit. It reads /proc with plain file reads (package proc),
// so the lean front binary passes a signal on to its job without linking a
// /proc library; package reap builds its reaper on Open and Send. Its
// functions are safe for concurrent use.
package pidfd

import "errors"

// ErrNotProcess is wrapped by [Open] when the pid names a thread rather
// than a process (thread-group leader).
var ErrNotProcess = errors.New("not a process")
