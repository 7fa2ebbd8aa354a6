//go:build !linux

package doctor

import (
	"errors"
	"os"
)

// Host returns this machine. lineage's backends need Linux: elsewhere every
// check that asks the kernel reports it unsupported.
func Host() System {
	unsupported := func() error { return errors.ErrUnsupported }
	return System{
		Root:          "/",
		Release:       func() (string, error) { return "", errors.ErrUnsupported },
		Euid:          os.Geteuid,
		EffectiveCaps: func() (uint64, error) { return 0, errors.ErrUnsupported },
		PidfdOpen:     unsupported,
		Subreaper:     unsupported,
		OpenBPF:       unsupported,
	}
}
