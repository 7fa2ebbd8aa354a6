package tracker

import (
	"fmt"
	"os"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// callerFacts gathers what the protected set needs to know of lineage itself.
func callerFacts(procFS proc.FS) (policy.Caller, error) {
	c := policy.Caller{PID: os.Getpid()}
	for pid := os.Getppid(); pid > 1; {
		c.Ancestors = append(c.Ancestors, pid)
		st, err := procFS.Stat(pid)
		if err != nil {
			break
		}
		if st.PPID == pid {
			break
		}
		pid = st.PPID
	}
	// Not root (a setcap install, or no privileges): signal only what the
	// user could signal with kill(2), whatever capabilities lineage holds.
	// The BPF backend bounds the kernel's kills by the same user.
	c.User = policy.InvokingUser(os.Getuid(), os.Geteuid())
	if err := c.Validate(); err != nil {
		return c, fmt.Errorf("protected set: %w", err)
	}
	return c, nil
}

// refuser is the policy's protected set, asked again at every signal.
// The member's user ids are read only when the caller's user bounds the
// signals.
func refuser(caller policy.Caller, root lineage.Identity, procFS proc.FS) func(lineage.Member, lineage.Stat) (string, bool) {
	return func(m lineage.Member, st lineage.Stat) (string, bool) {
		c := policy.Candidate{Member: m, Stat: st}
		if caller.User != nil {
			if ids, err := procFS.UIDs(int(m.PID)); err == nil {
				c.UIDs = &policy.UIDs{Real: ids.Real, Saved: ids.Saved}
			}
		}
		return policy.Protect(caller, root, c)
	}
}

// inspector is the backend's batch check for the reaper (loader.Inspector),
// or nil where it has none: the reaper then reads /proc per member.
func (t *Tracker) inspector() func([]uint32, []lineage.Stat) error {
	in, ok := t.backend.(loader.Inspector)
	if !ok {
		return nil
	}
	if works, _ := in.Inspects(); !works {
		return nil
	}
	return in.Inspect
}
