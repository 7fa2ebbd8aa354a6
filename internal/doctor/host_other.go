//go:build !linux

package doctor

import (
	"errors"

	"github.com/lineage-dev/lineage/internal/loader"
)

// Host returns this machine. lineage's backends need Linux: elsewhere every
// check that asks the kernel reports it unsupported.
func Host() System {
	unsupported := func() error { return errors.ErrUnsupported }
	return System{
		Root:      "/",
		Host:      func() loader.Host { return loader.Host{BTF: errors.ErrUnsupported, CapsErr: errors.ErrUnsupported} },
		Features:  func() (loader.Features, error) { return loader.Features{}, errors.ErrUnsupported },
		PidfdOpen: unsupported,
		Subreaper: unsupported,
		OpenBPF:   func() (loader.Loaded, error) { return loader.Loaded{}, errors.ErrUnsupported },
	}
}
