//go:build !linux

package reap

import (
	"errors"
	"fmt"
)

type pidfds struct{ Signaler }

func newPidfds() (*pidfds, error) {
	return nil, fmt.Errorf("pidfds: %w", errors.ErrUnsupported)
}

func (p *pidfds) Close() error { return nil }

// getpgrp: there is no process group to protect where nothing can be
// signalled; an injected Signaler is for tests.
func getpgrp() int { return -1 }
