//go:build !linux

package proc

import "github.com/lineage-dev/lineage/lineage"

// eachStat hands the stat of every live process to fn.
func (p FS) eachStat(fn func(lineage.Stat)) error {
	pids, err := p.PIDs()
	if err != nil {
		return err
	}
	for _, pid := range pids {
		if st, err := p.Stat(pid); err == nil {
			fn(st)
		}
	}
	return nil
}
