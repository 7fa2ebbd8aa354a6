package tracker

import (
	"errors"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/loader"
)

// The bpf backend kills in the kernel too: every member when lineage is
// killed (hard cancel "kernel"), and, while a lineage is reaped, what its
// members fork. What user space spares — what a keep rule keeps, what is in
// lineage's protected set — is marked in the kernel first
// ([loader.Sparer]), or the kernel would kill it anyway. A job marks:
//
//   - when it starts, and just before it reaps (so before anything is
//     contained), every member its keep rules or the protected set spare;
//   - as events come in, a member that execs a program a keep rule keeps,
//     and the children a spared member forks that the rules keep too (a
//     kept redis's background save).
//
// The reaper asks the rules again at every signal; the marks only keep the
// kernel from killing what it would spare.

// markSpared marks every member of j's lineage that keep (nil: no rules) or
// refuse spare.
func (j *Job) markSpared(keep func(lineage.Member) (bool, string), refuse func(lineage.Member, lineage.Stat) (string, bool)) {
	if _, ok := j.t.backend.(loader.Sparer); !ok {
		return
	}
	ms, err := j.t.backend.Members(j.root)
	if err != nil {
		j.t.note("lineage: spare in the kernel: %v\n", err)
		return
	}
	j.markSparedAmong(ms, keep, refuse)
}

// markSparedAmong is markSpared with the lineage's members listed.
func (j *Job) markSparedAmong(ms []lineage.Member, keep func(lineage.Member) (bool, string), refuse func(lineage.Member, lineage.Stat) (string, bool)) {
	for _, m := range ms {
		spare := false
		if keep != nil {
			spare, _ = keep(m)
		}
		if !spare {
			_, spare = refuse(m, markStat(m))
		}
		if spare {
			j.spare(m.Identity)
		}
	}
}

// markStat is what refuse needs of m's stat to decide a mark: the protected
// set judges a member by its identity (and, bounded by a user, by the uids
// it reads itself); a member is never a kernel thread. Reading each
// member's stat here would cost as much as the check at its signal, which
// reads it anyway. If m is gone, its pid may name another process by now;
// marking m then finds no member (the kernel drops a member's entry as it
// exits, before its pid is free).
func markStat(m lineage.Member) lineage.Stat {
	return lineage.Stat{Identity: m.Identity}
}

// spareOnEvent marks, for the event ev of j's lineage, a member that the
// keep rules now keep: one that exec'd, or the child of a spared member.
func (j *Job) spareOnEvent(ev lineage.Event) {
	switch ev.Kind {
	case lineage.EventExit:
		j.spared.Delete(ev.Process)
		return
	case lineage.EventFork:
		if _, ok := j.spared.Load(ev.Parent); !ok {
			return
		}
	case lineage.EventExec:
	default:
		return
	}
	keep := j.keeper()
	if keep == nil {
		return
	}
	m := lineage.Member{Identity: ev.Process, Parent: ev.Parent, Root: ev.Root, Filename: ev.Filename}
	if ok, _ := keep(m); ok {
		j.spare(ev.Process)
	}
}

func (j *Job) spare(id lineage.Identity) {
	s, ok := j.t.backend.(loader.Sparer)
	if !ok {
		return
	}
	if err := s.Spare(id); err != nil {
		if !errors.Is(err, loader.ErrNotMember) {
			j.t.note("lineage: spare in the kernel: %v\n", err)
		}
		return
	}
	j.spared.Store(id, struct{}{})
}
