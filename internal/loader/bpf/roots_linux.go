package bpf

import (
	"errors"
	"fmt"
	"os/exec"
	"runtime"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// Spawn implements Backend. It arms the calling OS thread so that the next
// process it forks becomes a root in the kernel's membership before it runs.
func (b *Tracker) Spawn(cmd *exec.Cmd, opts loader.RootOptions) (lineage.Identity, error) {
	b.spawnMu.Lock()
	defer b.spawnMu.Unlock()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	flags := uint32(0)
	if opts.DieWithSupervisor {
		flags |= uint32(lineageRootFlagROOT_F_DIE_WITH_SUPERVISOR)
	}
	if opts.KeepLineage {
		flags |= uint32(lineageRootFlagROOT_F_KEPT)
	}
	if err := b.objs.SpawnRootFlags.Set(flags); err != nil {
		return lineage.Identity{}, fmt.Errorf("arm spawn: %w", err)
	}
	// The root's exe rules apply from its first exec, before Spawn
	// returns: they wait for it under pid 0.
	if err := b.armKeeps(opts.KeepExes); err != nil {
		return lineage.Identity{}, err
	}
	defer b.disarmKeeps(opts.KeepExes)
	if err := b.objs.SpawnTid.Set(uint32(unix.Gettid())); err != nil {
		return lineage.Identity{}, fmt.Errorf("arm spawn: %w", err)
	}
	startErr := cmd.Start()
	if err := b.objs.SpawnTid.Set(uint32(0)); err != nil && startErr == nil {
		startErr = fmt.Errorf("disarm spawn: %w", err)
	}
	pid := uint32(0)
	if startErr == nil {
		pid = uint32(cmd.Process.Pid)
	}
	id, found := b.settleSpawned(pid, opts.KeepExes)
	if startErr != nil {
		return lineage.Identity{}, startErr
	}
	if !found {
		// Not registered: the membership map is full, or the fork was not
		// seen. Nothing of the command may run untracked.
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		st, _ := b.Stats()
		if st.MembersFull > 0 {
			return lineage.Identity{}, fmt.Errorf("spawn %s: membership map is full (%d members)", cmd.Path, b.opts.MaxMembers)
		}
		return lineage.Identity{}, fmt.Errorf("spawn %s: the kernel did not register the new process", cmd.Path)
	}
	b.spawnedRoot(id)
	return id, nil
}

// settleSpawned keeps the root the armed thread was meant to start (pid) and
// forgets any other process it forked meanwhile: the Go runtime may fork a
// short-lived probe of its own on the first start. The root's exe rules
// (keep) move under its pid before it stops being a spawning root.
func (b *Tracker) settleSpawned(pid uint32, keep []lineage.FileID) (lineage.Identity, bool) {
	var (
		key    uint32
		r      lineageRoot
		ours   lineage.Identity
		found  bool
		others []lineage.Identity
	)
	it := b.objs.Roots.Iterate()
	for it.Next(&key, &r) {
		if r.Flags&lineageRootFlagROOT_F_SPAWNING == 0 {
			continue
		}
		id := lineage.Identity{PID: key, StartTicks: r.Start}
		if key == pid {
			ours, found = id, true
		} else {
			others = append(others, id)
		}
	}
	for _, id := range others {
		_ = b.Forget(id)
	}
	if found {
		var m lineageMember
		err := b.objs.Members.Lookup(pid, &m)
		switch {
		case err == nil && m.Start != ours.StartTicks:
			found = false
		case err != nil && b.runningUntracked(ours):
			found = false
		}
		for _, f := range keep {
			b.mapMu.Lock()
			if err := b.putKeepExe(ours, f); err != nil {
				found = false
			}
			b.mapMu.Unlock()
		}
		if err := b.setRootFlag(ours, lineageRootFlagROOT_F_SPAWNING, false); err != nil {
			found = false
		}
	}
	return ours, found
}

// runningUntracked reports whether id runs without a member entry: it was
// never tracked, unlike a command that already exited or is exiting. The
// exit hook forgets a member as it exits, before its zombie shows (state
// Z), so a command that exits at once is read as exiting (PF_EXITING) or
// a zombie, never as running.
func (b *Tracker) runningUntracked(id lineage.Identity) bool {
	st, err := b.proc.Stat(int(id.PID))
	return err == nil && st.StartTicks == id.StartTicks && st.State != "Z" && !st.Exiting
}

// Register implements Backend.
func (b *Tracker) Register(id lineage.Identity, opts loader.RootOptions) error {
	if err := id.Validate(); err != nil {
		return err
	}
	st, err := b.proc.Stat(int(id.PID))
	if err == nil {
		err = proc.CheckStat(st, id)
	}
	if err != nil {
		return fmt.Errorf("register %s: %w", id, err)
	}
	if o := opts.Orphanage; o != (lineage.Identity{}) {
		if err := b.checkOrphanage(st, o); err != nil {
			return fmt.Errorf("register %s: %w", id, err)
		}
	}
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	var existing lineageMember
	if err := b.objs.Members.Lookup(id.PID, &existing); err == nil && existing.Start == id.StartTicks {
		return fmt.Errorf("register %s: %w: member of root %d@%d", id, loader.ErrAlreadyTracked, existing.RootPid, existing.RootStart)
	}
	r, m := rootEntries(id, opts)
	if err := b.objs.Roots.Update(id.PID, &r, ebpf.UpdateAny); err != nil {
		return fmt.Errorf("register %s: roots map: %w", id, err)
	}
	for _, f := range opts.KeepExes {
		if err := b.putKeepExe(id, f); err != nil {
			_ = b.objs.Roots.Delete(id.PID)
			return fmt.Errorf("register %s: %w", id, err)
		}
	}
	if parent, err := b.proc.Identity(st.PPID); err == nil {
		m.ParentPid, m.ParentStart = parent.PID, parent.StartTicks
	}
	if err := b.objs.Members.Update(id.PID, &m, ebpf.UpdateAny); err != nil {
		_ = b.objs.Roots.Delete(id.PID)
		if errors.Is(err, unix.E2BIG) {
			return fmt.Errorf("register %s: %w (%d members: raise --max-members)", id, loader.ErrMembersFull, b.opts.MaxMembers)
		}
		return fmt.Errorf("register %s: members map: %w", id, err)
	}
	// The pid may have died, and even been reused, between the check and
	// the insert; from here on the kernel keeps the entry exact.
	if err := b.proc.Check(id); err != nil {
		_ = b.objs.Members.Delete(id.PID)
		_ = b.objs.Roots.Delete(id.PID)
		return fmt.Errorf("register %s: %w", id, err)
	}
	_, err = b.proc.Adopt(id, b.isMemberLocked, func(child lineage.Stat, parent lineage.Identity) error {
		cm := lineageMember{
			Start:       child.StartTicks,
			ParentPid:   parent.PID,
			ParentStart: parent.StartTicks,
			RootPid:     id.PID,
			RootStart:   id.StartTicks,
			Flags:       lineageMemberFlagMEMBER_F_ADOPTED | m.Flags&lineageMemberFlagMEMBER_F_SPARED,
		}
		return b.objs.Members.Update(child.PID, &cm, ebpf.UpdateAny)
	})
	if err != nil {
		return fmt.Errorf("register %s: %w", id, err)
	}
	if opts.Orphanage != (lineage.Identity{}) {
		b.orphanageOf(id, opts.Orphanage)
	}
	return nil
}

// rootEntries are the roots and members map entries that make id a root,
// as opts ask.
func rootEntries(id lineage.Identity, opts loader.RootOptions) (lineageRoot, lineageMember) {
	r := lineageRoot{Start: id.StartTicks}
	m := lineageMember{
		Start:     id.StartTicks,
		RootPid:   id.PID,
		RootStart: id.StartTicks,
		Flags:     lineageMemberFlagMEMBER_F_ROOT | lineageMemberFlagMEMBER_F_ADOPTED,
	}
	if opts.DieWithSupervisor {
		r.Flags |= lineageRootFlagROOT_F_DIE_WITH_SUPERVISOR
	}
	if opts.KeepLineage {
		r.Flags |= lineageRootFlagROOT_F_KEPT
		m.Flags |= lineageMemberFlagMEMBER_F_SPARED
	}
	return r, m
}

func (b *Tracker) isMemberLocked(id lineage.Identity) bool {
	var m lineageMember
	return b.objs.Members.Lookup(id.PID, &m) == nil && m.Start == id.StartTicks
}

// Members implements Backend. Entries written by the kernel are exact
// while it runs every exit hook; entries written from user space, and every
// entry once the kernel has skipped a run of the exit hook (a member gone
// whose entry stayed), are checked against /proc, and dropped if their
// process is gone. Where the kernel skipped runs of the fork hook, what it
// missed is adopted from /proc first (see adoptMissed).
func (b *Tracker) Members(root lineage.Identity) ([]lineage.Member, error) {
	all, err := b.MembersOfEach([]lineage.Identity{root})
	if err != nil {
		return nil, fmt.Errorf("read members of %s: %w", root, err)
	}
	return all[root], nil
}

// MembersOfEach is [BPF.Members] for each of roots, from one pass over
// the membership map: the listing a reap of many roots at once works
// from. A root with no live member has no entry.
func (b *Tracker) MembersOfEach(roots []lineage.Identity) (map[lineage.Identity][]lineage.Member, error) {
	misses, err := b.forkMisses()
	if err != nil {
		return nil, err
	}
	for _, root := range roots {
		if misses == 0 {
			break
		}
		if err := b.adoptMissedOf(root); err != nil {
			return nil, err
		}
	}
	exits, err := b.exitMisses()
	if err != nil {
		return nil, err
	}
	entries, err := b.memberEntries()
	if err != nil {
		return nil, err
	}
	want := make(map[lineage.Identity]bool, len(roots))
	for _, r := range roots {
		want[r] = true
	}
	out := make(map[lineage.Identity][]lineage.Member, len(roots))
	var stale []lineage.Identity
	for _, e := range entries {
		m := &e.m
		root := lineage.Identity{PID: m.RootPid, StartTicks: m.RootStart}
		if !want[root] {
			continue
		}
		id := lineage.Identity{PID: e.pid, StartTicks: m.Start}
		if exits > 0 || m.Flags&lineageMemberFlagMEMBER_F_ADOPTED != 0 {
			if err := b.proc.Check(id); err != nil {
				stale = append(stale, id)
				continue
			}
		}
		out[root] = append(out[root], lineage.Member{
			Identity:  id,
			Parent:    lineage.Identity{PID: m.ParentPid, StartTicks: m.ParentStart},
			Root:      root,
			Contained: m.Flags&lineageMemberFlagMEMBER_F_CONTAINED != 0,
		})
	}
	for _, id := range stale {
		b.deleteMember(id)
	}
	return out, nil
}

// deleteMember removes id's entry if it still names id.
func (b *Tracker) deleteMember(id lineage.Identity) {
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	var m lineageMember
	if b.objs.Members.Lookup(id.PID, &m) == nil && m.Start == id.StartTicks {
		_ = b.objs.Members.Delete(id.PID)
	}
}

// Contain implements Backend. Containment lasts while this tracker's
// holder lives, and [ReapLease] more (lease_linux.go).
func (b *Tracker) Contain(root lineage.Identity) (lineage.Containment, error) {
	if err := b.renewLease(); err != nil {
		return "", err
	}
	if err := b.setRootFlag(root, lineageRootFlagROOT_F_REAPING, true); err != nil {
		return "", err
	}
	return b.loaded.Containment, nil
}

func (b *Tracker) setRootFlag(root lineage.Identity, flag lineageRootFlag, on bool) error {
	b.mapMu.Lock()
	defer b.mapMu.Unlock()
	var r lineageRoot
	if err := b.objs.Roots.Lookup(root.PID, &r); err != nil || r.Start != root.StartTicks {
		return fmt.Errorf("root %s: %w", root, loader.ErrNotRoot)
	}
	if on {
		r.Flags |= flag
	} else {
		r.Flags &^= flag
	}
	if err := b.objs.Roots.Update(root.PID, &r, ebpf.UpdateExist); err != nil {
		return fmt.Errorf("root %s: update: %w", root, err)
	}
	return nil
}

// Forget implements Backend.
func (b *Tracker) Forget(root lineage.Identity) error {
	b.mapMu.Lock()
	var r lineageRoot
	if err := b.objs.Roots.Lookup(root.PID, &r); err != nil || r.Start != root.StartTicks {
		b.mapMu.Unlock()
		return fmt.Errorf("forget %s: %w", root, loader.ErrNotRoot)
	}
	_ = b.objs.Roots.Delete(root.PID)
	b.mapMu.Unlock()
	b.forgetSpawned(root)

	entries, err := b.memberEntries()
	for _, e := range entries {
		if e.m.RootPid == root.PID && e.m.RootStart == root.StartTicks {
			b.deleteMember(lineage.Identity{PID: e.pid, StartTicks: e.m.Start})
		}
	}
	return errors.Join(err, b.forgetKeeps(root))
}

// IsRoot reports whether id is a registered root in the kernel's map: with
// a pinned tracker, one an earlier tracker registered. The root itself may
// have exited; its members stay its lineage.
func (b *Tracker) IsRoot(id lineage.Identity) bool {
	var r lineageRoot
	return b.objs.Roots.Lookup(id.PID, &r) == nil && r.Start == id.StartTicks
}

// Uncontain ends what Contain started, for a lineage that lives on after
// a reap that spared some of its members (a session's kept dev server):
// its members may fork again.
func (b *Tracker) Uncontain(root lineage.Identity) error {
	return b.setRootFlag(root, lineageRootFlagROOT_F_REAPING, false)
}

// Roots lists the roots registered in the kernel's map: with a pinned
// tracker, those an earlier holder registered too, exited ones included.
// It is a snapshot; safe for concurrent use.
func (b *Tracker) Roots() ([]lineage.Identity, error) {
	var (
		pid uint32
		r   lineageRoot
		out []lineage.Identity
	)
	it := b.objs.Roots.Iterate()
	for it.Next(&pid, &r) {
		out = append(out, lineage.Identity{PID: pid, StartTicks: r.Start})
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read roots: %w", err)
	}
	return out, nil
}
