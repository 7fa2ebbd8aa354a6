package server

import (
	"fmt"
	"maps"
	"slices"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// trackedSession returns the session of the lineage the caller itself
// belongs to, or "" when it belongs to none. The caller is found by the
// pid the kernel gave for the connection, at its current start time.
func (s *Server) trackedSession(p Peer) (string, error) {
	id, err := s.proc.Identity(p.PID)
	if err != nil {
		// The caller is gone, or its pid is not visible here: it can't be
		// shown not to be a member.
		return "", forbidden("caller pid %d can't be identified: %v", p.PID, err)
	}
	return s.trackedSessionOf(id)
}

// trackedSessionOf returns the session of the lineage id belongs to, or "".
// Every root's members are listed at once (one pass over the bpf
// membership map, where a listing per root would read it all each time).
// The roots are found from the index of roots, not by a look at every
// session: its cost grows with the roots, not with the sessions open.
func (s *Server) trackedSessionOf(id lineage.Identity) (string, error) {
	session := map[lineage.Identity]string{}
	s.reg.rootSession.Range(func(k, v any) bool {
		session[k.(lineage.Identity)] = v.(string)
		return true
	})
	s.reg.mu.Lock()
	for rid, sid := range session {
		if se := s.reg.sessions[sid]; se == nil || se.roots[rid] == nil {
			delete(session, rid) // forgotten, its late events still indexed
		}
	}
	s.reg.mu.Unlock()
	if sid, ok := session[id]; ok {
		return sid, nil
	}
	all, err := s.tracker.MembersOfEach(slices.Collect(maps.Keys(session)))
	if err != nil {
		// It can't be shown not to be a member.
		return "", forbidden("can't tell whether %s is tracked: %v", id, err)
	}
	for root, ms := range all {
		for _, m := range ms {
			if m.Identity == id {
				return session[root], nil
			}
		}
	}
	return "", nil
}

// mayChange refuses a caller that is itself a tracked process: a job may
// not untrack, keep, end or close anything, so it can't free itself.
func (s *Server) mayChange(p Peer, what string) error {
	sess, err := s.trackedSession(p)
	if err != nil {
		return err
	}
	if sess != "" {
		return forbidden("caller pid %d is tracked%s: a tracked process may not %s", p.PID, s.inSession(sess, p), what)
	}
	return nil
}

// inSession names session sid to p, when p may see it: to another uid, a
// session of root's that tracks its process is not named.
func (s *Server) inSession(sid string, p Peer) string {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	if se := s.reg.sessions[sid]; se != nil && se.visible(p) {
		return fmt.Sprintf(" in session %q", sid)
	}
	return ""
}

// mayRegister refuses pid, whose uids are uids, when the caller does not
// own it (real uid). Another uid's process is, to the caller, as one that
// doesn't exist: the same 404, with the same words, said before its start
// time is looked at (a mismatch would name it).
func (s *Server) mayRegister(p Peer, pid int64, uids proc.UIDs) error {
	if p.Root() || uids.Real == p.UID {
		return nil
	}
	return fmt.Errorf("pid %d: %w", pid, lineage.ErrNoProcess)
}

// killRefuser refuses, on behalf of uid, what kill(2) would refuse it:
// a process whose real and saved uids are both other than uid.
func (s *Server) killRefuser(uid uint32) func(lineage.Member, lineage.Stat) (string, bool) {
	if uid == 0 {
		return nil
	}
	return func(m lineage.Member, _ lineage.Stat) (string, bool) {
		uids, err := s.proc.UIDs(int(m.PID))
		if err != nil {
			return fmt.Sprintf("uids unknown: %v", err), true
		}
		if uids.Real == uid || uids.Saved == uid {
			return "", false
		}
		return fmt.Sprintf("owned by uid %d: uid %d could not signal it", uids.Real, uid), true
	}
}
