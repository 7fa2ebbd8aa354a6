package tracker

import (
	"errors"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// The bpf backend kills in the kernel too: every member when lineage is
// killed (hard cancel "kernel"), and, while a lineage is reaped, what its
// members fork. What user space spares — what a keep rule keeps, what is in
// lineage's protected set — the kernel must spare too, or it would kill it
// anyway. The kernel applies the keep rules itself where they apply
// ([loader.KernelKeeper]): a spawned job's exe rules from its root's first
// exec on, in the exec hook's run, and their marks pass to the forks that
// exec nothing. User space marks what the kernel can't know
// ([loader.Sparer]), and checks what it can:
//
//   - when the job starts, and just before it reaps (so before anything is
//     contained), every member its keep rules or the protected set spare;
//   - as events come in, a member that execs a program a keep rule keeps
//     and that the kernel did not spare (a script: the kernel runs its
//     interpreter; a rule's file replaced since: see exeKeeps), and the
//     children a spared member forks that the rules keep too.
//
// The reaper asks the rules again at every signal; the marks only keep the
// kernel from killing what it would spare.

// markSpared marks every member of j's lineage that keep (nil: no rules) or
// refuse spare. It returns the members it listed to find them, with listed
// set, when it listed them (the backend marks, and the listing worked).
func (j *Job) markSpared(keep *keepTally, refuse func(lineage.Member, lineage.Stat) (string, bool)) (ms []lineage.Member, listed bool) {
	if _, ok := j.t.backend.(loader.Sparer); !ok {
		return nil, false
	}
	ms, err := j.t.backend.Members(j.root)
	if err != nil {
		j.t.note("lineage: spare in the kernel: %v\n", err)
		return nil, false
	}
	j.markSparedAmong(ms, keep, refuse)
	return ms, true
}

// markSparedAmong is markSpared with the lineage's members listed.
func (j *Job) markSparedAmong(ms []lineage.Member, keep *keepTally, refuse func(lineage.Member, lineage.Stat) (string, bool)) {
	for _, m := range ms {
		if keep != nil {
			if rule, ok := keep.match(m); ok {
				j.spareFor(m.Identity, rule)
				continue
			}
		}
		if _, spare := refuse(m, markStat(m)); spare {
			j.spare(m.Identity, false)
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

// spareOnEvent checks, for the event ev of j's lineage, what the kernel
// spared in the hook run: a member that exec'd a program a keep rule keeps,
// or the child of a spared member that the rules keep too, is marked if
// the kernel did not mark it.
func (j *Job) spareOnEvent(ev lineage.Event) {
	switch ev.Kind {
	case lineage.EventExit:
		j.spared.Delete(ev.Process)
		return
	case lineage.EventFork:
		if ev.Spared {
			j.spared.Store(ev.Process, struct{}{})
			return
		}
		if _, ok := j.spared.Load(ev.Parent); !ok {
			return
		}
	case lineage.EventExec:
		if ev.Spared {
			j.spared.Store(ev.Process, struct{}{})
			return
		}
		// A mark for the program it ran ended with this exec; the rules
		// judge it again below.
		j.spared.Delete(ev.Process)
	default:
		return
	}
	keep := j.tally()
	if keep == nil {
		return
	}
	m := lineage.Member{Identity: ev.Process, Parent: ev.Parent, Root: ev.Root, Filename: ev.Filename}
	rule, ok := keep.match(m)
	if !ok {
		return
	}
	if exe, isExe := rule.Exe(); isExe && ev.Kind == lineage.EventExec && rule.SparesExe(ev.Filename) {
		j.exeChanged(rule, exe, ev)
	}
	j.spareFor(ev.Process, rule)
}

// spareFor marks id spared for rule: for the program it runs when rule is
// an exe rule (its forks inherit the mark until they exec another), else
// whatever it execs.
func (j *Job) spareFor(id lineage.Identity, rule policy.Keep) {
	_, isExe := rule.Exe()
	j.spare(id, isExe)
}

// spare marks id spared in the kernel: for its program, or for good.
func (j *Job) spare(id lineage.Identity, forProgram bool) {
	s, ok := j.t.backend.(loader.Sparer)
	if !ok {
		return
	}
	var err error
	if k, isKeeper := s.(loader.KernelKeeper); isKeeper && forProgram {
		err = k.SpareProgram(id)
	} else {
		err = s.Spare(id)
	}
	if err != nil {
		if !errors.Is(err, loader.ErrNotMember) {
			j.t.note("lineage: spare in the kernel: %v\n", err)
		}
		return
	}
	j.spared.Store(id, struct{}{})
}
