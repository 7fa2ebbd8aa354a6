package tracker

import (
	"errors"
	"fmt"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/policy"
)

// A registered job's keep rules are its session's, given at each settle
// (SettleOptions.Keep). Had only user space known them until then, the
// kernel would kill what they keep when it is born during a reap's
// containment (a kept program's fork, a kept lineage's new child).
// KeepInKernel tells the kernel the rules as the session takes them, so
// that it applies them in the hook run where they apply; UnkeepInKernel
// takes one back. The rules still decide in user space at every signal.

// KeepInKernel tells a backend that applies keep rules itself
// ([loader.KernelKeeper]) what of rules applies to j's lineage: each exe
// rule's file (as the rule resolved it), a root rule on j's root, and a
// rule by identity on one of its members (marked whatever it execs). The
// members that run a kept program already, or all of them for a kept
// lineage, are marked too. Other backends do nothing. A rule the kernel
// can't take is said in the error; the others are taken. Safe for
// concurrent use.
func (j *Job) KeepInKernel(rules policy.KeepRules) error {
	k, ok := j.t.backend.(loader.KernelKeeper)
	if !ok || len(rules) == 0 {
		return nil
	}
	var errs []error
	if rules.KeepsRoot(j.root) {
		if err := k.KeepLineage(j.root); err != nil {
			errs = append(errs, fmt.Errorf("keep the lineage of %s in the kernel: %w", j.root, err))
		}
	}
	// The members the rules keep already are marked from one listing.
	var marking policy.KeepRules
	for _, rule := range rules {
		if _, ok := rule.Process(); ok {
			marking = append(marking, rule)
			continue
		}
		f, ok := rule.File()
		if !ok {
			continue
		}
		marking = append(marking, rule)
		if err := k.KeepExe(j.root, f); err != nil {
			errs = append(errs, fmt.Errorf("keep %s for %s in the kernel: %w", rule, j.root, err))
		}
	}
	if len(marking) > 0 {
		errs = append(errs, j.markKept(marking))
	}
	return errors.Join(errs...)
}

// markKept marks the members of j's lineage that rules keep (a process
// kept by identity, whatever it execs; one running a program an exe rule
// keeps, for that program): they ran before the kernel knew the rule.
func (j *Job) markKept(rules policy.KeepRules) error {
	ms, err := j.t.backend.Members(j.root)
	if err != nil {
		return fmt.Errorf("members of %s: %w", j.root, err)
	}
	tally := newKeepTally(rules, j.t.tree, j.t.proc)
	for _, m := range ms {
		if rule, ok := tally.match(m); ok {
			j.spareFor(m.Identity, rule)
		}
	}
	return nil
}

// UnkeepInKernel takes rule back from the kernel for j's lineage, when
// the backend can ([loader.KernelUnkeeper]): an exe rule's file is no
// longer kept at exec, a root rule's lineage no longer born spared. The
// marks members have already stay, as user space's do: they only keep the
// kernel from killing a member's new child at birth, and the reaper judges
// each member again at every signal. A caller that holds other rules
// still gives them again (KeepInKernel), since two rules may name one file.
func (j *Job) UnkeepInKernel(rule policy.Keep) error {
	u, ok := j.t.backend.(loader.KernelUnkeeper)
	if !ok {
		return nil
	}
	if (policy.KeepRules{rule}).KeepsRoot(j.root) {
		if err := u.UnkeepLineage(j.root); err != nil && !errors.Is(err, loader.ErrNotRoot) {
			return fmt.Errorf("unkeep the lineage of %s in the kernel: %w", j.root, err)
		}
	}
	if f, ok := rule.File(); ok {
		if err := u.UnkeepExe(j.root, f); err != nil && !errors.Is(err, loader.ErrNotRoot) {
			return fmt.Errorf("unkeep %s for %s in the kernel: %w", rule, j.root, err)
		}
	}
	return nil
}
