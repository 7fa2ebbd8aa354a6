package guardian

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// reapSlack is how long a reap may take beyond the grace before the
// guardian kills what it knows without waiting, and exits: every guardian
// has a finite lifetime.
const reapSlack = 30 * time.Second

// abort ends the lineage of a lineage that died before it said done: decide,
// contain, reap, say what happened.
func abort(h *hello, root lineage.Identity, src source, stderr io.Writer) error {
	d := policy.Decide(policy.Input{
		// A hard cancel ends the job as its root's exit would.
		Event:   policy.RootExit,
		Reaping: h.Reaping,
		Kept:    h.Keep.KeepsRoot(root),
	})
	if d.Action != policy.Reap {
		fmt.Fprintf(stderr, "lineage guardian: lineage died before it finished; %s: nothing signalled\n", d)
		return nil
	}
	fs, err := proc.Open("/proc")
	if err != nil {
		return err
	}
	opts := reap.Options{
		Grace:  h.Grace,
		Keep:   keeper(h.Keep, fs),
		Refuse: refuser(h.Caller, root, fs),
	}
	// What the rules spare, the kernel must spare too; then contain before
	// anything else: the kernel kills new children from now on, so the
	// lineage can't grow while it is listed.
	markSpared(src, fs, opts, stderr)
	how, containErr := src.contain()
	ctx, cancel := context.WithTimeout(context.Background(), h.Grace+reapSlack)
	defer cancel()
	if how != "" || containErr != nil {
		// On an error the reaper notes it and stops the set itself.
		opts.Contain = func() (lineage.Containment, error) { return how, containErr }
	}
	rep, err := reap.Reap(ctx, src, opts)
	fmt.Fprintf(stderr, "lineage guardian: lineage died before it finished; reaped %s (%s): %d terminated, %d killed, %d exited, %d kept, %d refused, %d survived\n",
		root, rep.Containment, rep.Count(lineage.Terminated), rep.Count(lineage.Killed), rep.Count(lineage.Exited),
		rep.Count(lineage.Kept), rep.Count(lineage.Refused), rep.Count(lineage.Survived))
	for _, o := range rep.Outcomes {
		if o.Result == lineage.Refused || o.Result == lineage.Survived {
			fmt.Fprintf(stderr, "lineage guardian: %s %s: %s\n", o.Member.Identity, o.Result, o.Reason)
		}
	}
	if err != nil {
		return fmt.Errorf("reap %s: %w", root, err)
	}
	return nil
}

// markSpared marks in the kernel (bpf) the members that opts' Keep or
// Refuse spare, so that containment spares them and their children too.
func markSpared(src source, fs proc.FS, opts reap.Options, stderr io.Writer) {
	ms, err := src.Members()
	if err != nil {
		return // the reap lists them again, and says so
	}
	for _, m := range ms {
		spare := false
		if opts.Keep != nil {
			spare, _ = opts.Keep(m)
		}
		if st, err := fs.Stat(int(m.PID)); !spare && err == nil && st.StartTicks == m.StartTicks {
			_, spare = opts.Refuse(m, st)
		}
		if !spare {
			continue
		}
		if err := src.spare(m.Identity); err != nil && !errors.Is(err, loader.ErrNotMember) {
			fmt.Fprintf(stderr, "lineage guardian: spare %s in the kernel: %v\n", m.Identity, err)
		}
	}
}

// keeper applies the keep rules as `lineage run` does: an exe rule matches
// the executable the kernel shows for the process.
func keeper(rules policy.KeepRules, fs proc.FS) func(lineage.Member) (bool, string) {
	if len(rules) == 0 {
		return nil
	}
	// The rules came as text: resolve their paths again, as lineage did.
	// lineage refused those that named no program; one whose program is
	// gone since still matches by its name.
	rules, _ = rules.ResolveExe(fs.ExeFile)
	return func(m lineage.Member) (bool, string) {
		if exe, err := fs.Exe(int(m.PID)); err == nil && exe != "" {
			m.Filename = exe
		}
		rule, ok := rules.Spares(m)
		if !ok {
			return false, ""
		}
		return true, "kept by --keep " + rule.String()
	}
}

// refuser is lineage's protected set, as lineage told it: its own pid, its
// ancestors and its process group stay protected after its death.
// With a caller's user, the member's user ids are read too (see
// policy.Caller.User).
func refuser(caller policy.Caller, root lineage.Identity, fs proc.FS) func(lineage.Member, lineage.Stat) (string, bool) {
	return func(m lineage.Member, st lineage.Stat) (string, bool) {
		c := policy.Candidate{Member: m, Stat: st}
		if caller.User != nil {
			if ids, err := fs.UIDs(int(m.PID)); err == nil {
				c.UIDs = &policy.UIDs{Real: ids.Real, Saved: ids.Saved}
			}
		}
		return policy.Protect(caller, root, c)
	}
}
