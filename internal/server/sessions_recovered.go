package server

import (
	"strconv"
	"time"

	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// recoveredID is the id of the session that takes the roots a pinned
// tracker holds and the state file doesn't list ("recovered-2" and on when
// a session of that id exists).
const recoveredID = "recovered"

// recoveredLabel says where a recovered session's roots come from.
const recoveredLabel = "roots the pinned tracker held that the state file did not list"

// adoptUnlisted puts the roots that a pinned tracker taken over still holds
// in the kernel, and that no restored session names (the state file was
// lost, or the daemon died between a registration and its write), into one
// recovered session: root's (uid 0), interactive, so that no turn end kills
// anything and an operator sees the roots in `session ls` and closes the
// session (which reaps them) or keeps what must live. A root with no live
// process left is forgotten. Nothing is signalled here.
func (s *Server) adoptUnlisted() {
	pinned, err := s.tracker.PinnedRoots()
	if err != nil {
		s.note("lineage: list the pinned tracker's roots: %v\n", err)
		return
	}
	var unlisted []lineage.Identity
	for _, id := range pinned {
		if _, listed := s.reg.rootSession.Load(id); !listed {
			unlisted = append(unlisted, id)
		}
	}
	if len(unlisted) == 0 {
		return
	}
	live := s.tracker.MembersOf(unlisted)
	se := &session{id: s.recoveredID(), kind: policy.Interactive, label: recoveredLabel, opened: time.Now(), roots: make(map[lineage.Identity]*root)}
	for _, id := range unlisted {
		j, err := s.tracker.Resume(id, tracker.RegisterOptions{})
		if err != nil {
			s.note("lineage: unlisted root %s not recovered: %v\n", id, err)
			continue
		}
		if len(live[id]) == 0 {
			_ = j.Close()
			continue
		}
		se.roots[id] = &root{job: j, label: "recovered", added: se.opened}
		s.reg.rootSession.Store(id, se.id)
	}
	if len(se.roots) == 0 {
		return
	}
	s.reg.mu.Lock()
	s.reg.sessions[se.id] = se
	s.touch(se)
	s.forceSession(se)
	s.reg.mu.Unlock()
	n := len(se.roots)
	s.note("lineage: %d %s in the pinned tracker %s in no saved session: %s in session %s (lineage session close %s reaps %s)\n",
		n, lineage.Plural(n, "root", "roots"), lineage.Plural(n, "was", "were"), lineage.Plural(n, "it is", "they are"), se.id, se.id, lineage.Plural(n, "it", "them"))
	s.save()
}

// recoveredID is an id for the recovered session that no session has.
func (s *Server) recoveredID() string {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	id := recoveredID
	for n := 2; s.reg.sessions[id] != nil; n++ {
		id = recoveredID + "-" + strconv.Itoa(n)
	}
	return id
}
