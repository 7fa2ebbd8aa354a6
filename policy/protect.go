package policy

import (
	"fmt"
	"slices"

	"github.com/lineage-dev/lineage/lineage"
)

// Caller is what the protected set must know of the process that would send
// the signals: lineage itself.
type Caller struct {
	// PID is lineage's own pid (os.Getpid).
	PID int
	// Ancestors are the pids of lineage's ancestors by parent pid, nearest
	// first, up to init: the CI runner or agent host that started it.
	Ancestors []int
	// User, when set, is the invoking user whose kill(2) permission bounds
	// what lineage may signal: set when lineage runs as another uid than
	// root, as a setcap install does (its CAP_KILL is no licence to signal
	// what the user could not).
	User *KillUser
}

// KillUser is the user on whose behalf lineage signals: kill(2) lets a
// process signal another when the sender's real or effective uid is the
// target's real or saved uid.
type KillUser struct {
	Real, Effective uint32
}

// InvokingUser is the user on whose behalf a process running with real
// uid uid and effective uid euid signals: nil for root, whose kill(2) has no
// bound, and otherwise that user, whatever capabilities the process holds
// (a setcap install).
func InvokingUser(uid, euid int) *KillUser {
	if uid == 0 {
		return nil
	}
	return &KillUser{Real: uint32(uid), Effective: uint32(euid)}
}

// may reports whether u could signal a process with uids ids by kill(2).
func (u KillUser) may(ids UIDs) bool {
	for _, s := range []uint32{u.Real, u.Effective} {
		if s == ids.Real || s == ids.Saved {
			return true
		}
	}
	return false
}

// UIDs are a candidate's real and saved user ids, as /proc/PID/status
// shows them.
type UIDs struct {
	Real, Saved uint32
}

// Validate returns an error wrapping [lineage.ErrInvalid] when c lacks a fact the
// protected set needs.
func (c Caller) Validate() error {
	switch {
	case c.PID <= 0:
		return fmt.Errorf("%w caller: pid %d", lineage.ErrInvalid, c.PID)
	}
	return nil
}

// Candidate is a process the reaper might signal: the member as the backend
// recorded it, and its /proc/PID/stat as read just now.
type Candidate struct {
	Member lineage.Member
	Stat   lineage.Stat
	// UIDs are the candidate's user ids; Protect needs them only when the
	// caller has a User, and protects when they are missing then.
	UIDs *UIDs
}

// Protect reports whether c must never be signalled while reaping root's
// lineage on behalf of caller, and why. It protects, in this order:
//
//   - pid 0 and 1;
//   - lineage itself and its ancestors;
//   - anything that is not a member of root's lineage;
//   - a member whose stat is missing or is for another pid;
//   - a member whose live start time differs from its recorded one (the pid
//     was reused by a stranger);
//   - kernel threads;
//   - with a [Caller.User], anything that user could not signal by kill(2)
//     (a sudo-started descendant of the user's job), or whose uids are
//     unknown.
//
// Protection is by identity alone: lineage never signals a group, so a
// member that shares lineage's process group or session is reaped like any
// other (an agent host that starts the daemon as its own child shares its
// group with every `cmd &` it runs). Protect only ever protects: when in
// doubt (a zero member, a missing stat) the answer is protected. The reaper
// checks the identity again at the signal, through a pidfd.
func Protect(caller Caller, root lineage.Identity, c Candidate) (reason string, protected bool) {
	m, st := c.Member, c.Stat
	pid := int(m.PID)
	switch {
	case pid <= 1:
		return fmt.Sprintf("pid %d: pid 0 and 1 are never signalled", pid), true
	case pid == caller.PID:
		return fmt.Sprintf("pid %d is lineage itself", pid), true
	case slices.Contains(caller.Ancestors, pid):
		return fmt.Sprintf("pid %d is an ancestor of lineage", pid), true
	case m.StartTicks == 0:
		return fmt.Sprintf("pid %d: not a member (no recorded start time)", pid), true
	case m.Identity != root && m.Root != root:
		return fmt.Sprintf("%s is not a member of root %s", m.Identity, root), true
	case st.PID != m.PID:
		if st.PID == 0 {
			return fmt.Sprintf("%s: no /proc stat was read", m.Identity), true
		}
		return fmt.Sprintf("%s: /proc stat is for pid %d", m.Identity, st.PID), true
	case st.StartTicks != m.StartTicks:
		return fmt.Sprintf("identity mismatch: pid %d started at %d, the member at %d (pid reused)", pid, st.StartTicks, m.StartTicks), true
	case st.Kernel:
		return fmt.Sprintf("%s is a kernel thread", m.Identity), true
	}
	return protectUser(caller.User, c)
}

// protectUser protects what the invoking user could not signal.
func protectUser(u *KillUser, c Candidate) (string, bool) {
	switch {
	case u == nil:
		return "", false
	case c.UIDs == nil:
		return fmt.Sprintf("%s: its user ids are unknown, and lineage signals only what uid %d could", c.Member.Identity, u.Real), true
	case !u.may(*c.UIDs):
		return fmt.Sprintf("%s runs as uid %d (saved %d): uid %d, who ran lineage, could not signal it", c.Member.Identity, c.UIDs.Real, c.UIDs.Saved, u.Real), true
	}
	return "", false
}
