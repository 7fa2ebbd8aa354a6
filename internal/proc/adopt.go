package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/lineage-dev/lineage/lineage"
)

// SkipProcess, returned by the add function of [FS.Adopt], leaves that
// process out: it is not counted as added, and no walk goes on from it to
// its children (it belongs to another lineage, say).
var SkipProcess = errors.New("skip this process")

// Adopt finds the live descendants of root that are not yet members (not
// kernel threads, not zombies) and
// hands each to add, with the identity of its current parent, parents before
// children. It repeats full passes over /proc until one adds nothing, so a
// process forked by a descendant while an earlier pass ran is still found.
// isMember reports what is already a member (root included). add may
// return SkipProcess to leave a process out. Adopt returns how many
// processes it added.
//
// Descendants are found by ppid, the only relation /proc shows: a process
// that a descendant created and that was reparented away before the first
// pass can't be found this way. Every fork after root is registered is
// caught by the backend itself.
//
// A root that has no children at all, as its threads' children files show
// once it is registered, has no descendant a pass could find: Adopt then
// reads nothing else (a root held until registered, as `lineage run`
// starts one through the daemon, costs no scan of /proc).
func (p FS) Adopt(root lineage.Identity, isMember func(lineage.Identity) bool, add func(child lineage.Stat, parent lineage.Identity) error) (int, error) {
	if p.childless(root) {
		return 0, nil
	}
	return p.adopt(root, isMember, nil, add)
}

// AdoptWithOrphans is Adopt that also adopts every live process isOrphan
// claims for root (not a kernel thread, not a zombie, not a member), with
// the zero identity as its parent, and then its descendants. A child
// subreaper names this way the orphans it inherited from root's lineage:
// their parent died before anything saw them, so no member is their
// parent.
func (p FS) AdoptWithOrphans(root lineage.Identity, isMember func(lineage.Identity) bool, isOrphan func(lineage.Stat) bool, add func(child lineage.Stat, parent lineage.Identity) error) (int, error) {
	return p.adopt(root, isMember, isOrphan, add)
}

func (p FS) adopt(root lineage.Identity, isMember func(lineage.Identity) bool, isOrphan func(lineage.Stat) bool, add func(lineage.Stat, lineage.Identity) error) (int, error) {
	added := 0
	for pass := 0; ; pass++ {
		if pass > 1000 {
			return added, fmt.Errorf("adopt descendants of %s: still finding new processes after %d passes", root, pass)
		}
		n, err := p.adoptPass(root, isMember, isOrphan, add)
		added += n
		if err != nil || n == 0 {
			return added, err
		}
	}
}

func (p FS) adoptPass(root lineage.Identity, isMember func(lineage.Identity) bool, isOrphan func(lineage.Stat) bool, add func(lineage.Stat, lineage.Identity) error) (int, error) {
	stats := make(map[int]lineage.Stat)
	children := make(map[int][]int)
	// A process that exited while we looked is left out.
	if err := p.eachStat(func(st lineage.Stat) {
		pid := int(st.PID)
		stats[pid] = st
		children[st.PPID] = append(children[st.PPID], pid)
	}); err != nil {
		return 0, err
	}
	added := 0
	// Walk down from every member: a member reparented away from root still
	// has its own children. An orphan is adopted first, then walked down
	// from as a member is.
	var queue []int
	for pid, st := range stats {
		switch {
		case st.Identity == root || isMember(st.Identity):
			queue = append(queue, pid)
		case isOrphan != nil && !st.Kernel && !st.Zombie() && isOrphan(st):
			switch err := add(st, lineage.Identity{}); {
			case errors.Is(err, SkipProcess):
			case err != nil:
				return added, fmt.Errorf("adopt orphan %s: %w", st.Identity, err)
			default:
				added++
				queue = append(queue, pid)
			}
		}
	}
	seen := make(map[int]bool, len(queue))
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		parent := stats[pid].Identity
		for _, c := range children[pid] {
			st := stats[c]
			// A zombie's exit has run: adopted, it would stay listed
			// with no exit left to remove it, and it has no children.
			if st.Kernel || st.Zombie() || seen[c] {
				continue
			}
			if !isMember(st.Identity) {
				err := add(st, parent)
				if errors.Is(err, SkipProcess) {
					continue
				}
				if err != nil {
					return added, fmt.Errorf("adopt %s: %w", st.Identity, err)
				}
				added++
			}
			queue = append(queue, c)
		}
	}
	return added, nil
}

// childless reports whether root has no child: every thread's
// /proc/PID/task/TID/children is empty, and root is still root afterwards.
// A thread that exits while it is read hands its children to another
// thread first, and its own file then fails to read. False when it can't
// be shown (a kernel without CONFIG_PROC_CHILDREN has no such files).
func (p FS) childless(root lineage.Identity) bool {
	dir := filepath.Join(p.root, strconv.Itoa(int(root.PID)), "task")
	tids, err := os.ReadDir(dir)
	if err != nil || len(tids) == 0 {
		return false
	}
	for _, tid := range tids {
		b, err := ReadFile(filepath.Join(dir, tid.Name(), "children"))
		if err != nil || len(bytes.TrimSpace(b)) > 0 {
			return false
		}
	}
	return p.Check(root) == nil
}
