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
