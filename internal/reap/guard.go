package reap

import (
	"errors"
	"fmt"
	"os"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// guard is the protected set of one reap: the processes it never signals.
type guard struct {
	self      int
	ancestors map[lineage.Identity]bool // the reaper and its ancestors
	protect   map[lineage.Identity]bool
}

// newGuard reads the reaper's own identity and ancestors from proc, and adds
// protect.
func newGuard(proc proc.FS, protect []lineage.Identity) (*guard, error) {
	g := &guard{
		self:    os.Getpid(),
		protect: make(map[lineage.Identity]bool, len(protect)),
	}
	for _, id := range protect {
		g.protect[id] = true
	}
	var err error
	// A parent that exits while we walk reparents us: walk again.
	for range 3 {
		if g.ancestors, err = ancestry(proc, g.self); !errors.Is(err, lineage.ErrNoProcess) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("find own ancestors: %w", err)
	}
	return g, nil
}

// ancestry returns pid's identity and its ancestors' by parent pid, up to
// (not including) pid 1.
func ancestry(proc proc.FS, pid int) (map[lineage.Identity]bool, error) {
	out := make(map[lineage.Identity]bool)
	for depth := 0; pid > 1; depth++ {
		if depth > 1<<16 {
			return nil, fmt.Errorf("parent chain of pid %d loops", pid)
		}
		st, err := proc.Stat(pid)
		if err != nil {
			return nil, err
		}
		out[st.Identity] = true
		pid = st.PPID
	}
	return out, nil
}

// refuseIdentity says why id must not be signalled, judging by the identity
// alone, or returns "".
func (g *guard) refuseIdentity(id lineage.Identity) string {
	switch {
	case id.PID <= 1:
		return fmt.Sprintf("pid %d: pid 0 and 1 are never signalled", id.PID)
	case int(id.PID) == g.self:
		return fmt.Sprintf("pid %d is the reaper itself", id.PID)
	case id.StartTicks == 0:
		return fmt.Sprintf("pid %d: no start time, so no identity to check", id.PID)
	case g.ancestors[id]:
		return fmt.Sprintf("%s is an ancestor of the reaper", id)
	case g.protect[id]:
		return fmt.Sprintf("%s is protected by the caller", id)
	}
	return ""
}

// refuse says why the process whose stat was just read must not be
// signalled, or returns "".
func (g *guard) refuse(st lineage.Stat) string {
	if reason := g.refuseIdentity(st.Identity); reason != "" {
		return reason
	}
	if st.Kernel {
		return fmt.Sprintf("%s is a kernel thread", st.Identity)
	}
	return ""
}
