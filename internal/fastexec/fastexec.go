//go:build cgo

package fastexec

// #include "fastexec.h"
import "C"

// Linked says this binary has the fast path.
const Linked = true

// The fast path's fixed values (fastexec.h), which must be the Go side's.
const (
	cannotRun     = C.FASTEXEC_CANNOT_RUN
	defaultSocket = C.FASTEXEC_DEFAULT_SOCKET
	envSocket     = C.FASTEXEC_ENV_SOCKET
)
