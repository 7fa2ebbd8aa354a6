package lineage

import "errors"

// ErrInvalid is wrapped by every error about input lineage can't accept: a
// malformed identity, a pid ≤ 1, an option out of range, a keep rule or a
// kill-switch value it can't read. Such an error means nothing was changed.
var ErrInvalid = errors.New("invalid")

// ErrNoProcess is wrapped when a pid names no live process.
var ErrNoProcess = errors.New("no such process")

// ErrIdentityMismatch is wrapped when a pid is alive but its start time is not
// the one expected: the pid was reused by a stranger, or the start time
// given was wrong.
var ErrIdentityMismatch = errors.New("identity mismatch: another process has that pid now, or the start time is wrong")
