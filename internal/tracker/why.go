package tracker

import (
	"fmt"

	"github.com/lineage-dev/lineage/lineage"
)

// Step is one process of a chain of lineage parents, as [Job.Why] gives it.
type Step struct {
	lineage.Member
	// Argv is from the process's last exec the tracker saw, or /proc's
	// for a live process whose exec it did not see (one adopted at
	// registration).
	Argv []string `json:"argv,omitempty"`
	// Alive is set while the process runs; PPID is then its current
	// parent pid, which a reparent changes, unlike Parent.
	Alive bool `json:"alive"`
	PPID  int  `json:"ppid,omitempty"`
	// Skipped counts exited ancestors between this process and the next
	// step that the tracker dropped to bound its memory
	// ([lineage.MaxExitedKept]); Parent is the first of them.
	Skipped int `json:"skipped,omitempty"`
}

// Why returns id's chain of lineage parents, id first, up to the job's
// root, or as far as the tracker knows it (the last step's Parent is then
// the first process it does not know). ok is false when id is not a
// process of this job's lineage that the tracker knows, alive or an
// exited ancestor of a live member. Safe for concurrent use.
func (j *Job) Why(id lineage.Identity) (steps []Step, ok bool, err error) {
	t := j.t
	if m, known := t.tree.Get(id); known && m.Root != j.root && id != j.root {
		return nil, false, nil
	}
	ms, err := t.backend.Members(j.root)
	if err != nil {
		return nil, false, fmt.Errorf("members of %s: %w", j.root, err)
	}
	live := make(map[lineage.Identity]lineage.Member, len(ms))
	for _, m := range ms {
		live[m.Identity] = m
	}
	seen := make(map[lineage.Identity]bool)
	for cur := id; !cur.IsZero() && !seen[cur]; {
		seen[cur] = true
		st, next, found := j.step(cur, live)
		if !found {
			break
		}
		steps = append(steps, st)
		if cur == j.root {
			break
		}
		cur = next
	}
	return steps, len(steps) > 0, nil
}

// step is what the tracker knows of cur: the tree's memory of it merged
// with the backend's live member, if it is one.
// It also returns the process that comes next in the chain.
func (j *Job) step(cur lineage.Identity, live map[lineage.Identity]lineage.Member) (Step, lineage.Identity, bool) {
	t := j.t
	l, next, known := t.tree.Up(cur)
	lm, alive := live[cur]
	if !known && !alive && cur != j.root {
		return Step{}, lineage.Identity{}, false
	}
	st := Step{Alive: alive, Member: lm}
	if known {
		st.Member, st.Skipped = l.Member, l.Skipped
		st.Argv = l.Argv
	}
	st.Identity, st.Root = cur, j.root
	if st.Parent.IsZero() {
		st.Parent = lm.Parent
	}
	if next.IsZero() {
		next = st.Parent
	}
	if cur == j.root && len(st.Argv) == 0 {
		st.Argv = j.rep.Command
	}
	if alive {
		st.Exited = false
		if s, err := t.proc.Stat(int(cur.PID)); err == nil && s.StartTicks == cur.StartTicks {
			st.PPID = s.PPID
			if st.Comm == "" {
				st.Comm = s.Comm
			}
		}
		if len(st.Argv) == 0 {
			st.Argv, _ = t.proc.Argv(int(cur.PID))
		}
	}
	st.Member.Argv = nil
	return st, next, true
}
