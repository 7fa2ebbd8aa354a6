package server

import (
	"fmt"
	"sync"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/lineage"
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
// The roots' members are listed concurrently (see listAll).
func (s *Server) trackedSessionOf(id lineage.Identity) (string, error) {
	var (
		sessions []string
		jobs     []*job.Job
	)
	s.mu.Lock()
	for sid, se := range s.sessions {
		for _, r := range se.roots {
			if r.job.Root() == id {
				s.mu.Unlock()
				return sid, nil
			}
			sessions, jobs = append(sessions, sid), append(jobs, r.job)
		}
	}
	s.mu.Unlock()
	for i, ms := range listAll(jobs) {
		for _, m := range ms {
			if m.Identity == id {
				return sessions[i], nil
			}
		}
	}
	return "", nil
}

// parallelLists bounds how many roots' members listAll lists at once.
const parallelLists = 64

// listAll returns the live members of each of jobs, listed concurrently:
// with the bpf backend, listings made at once share one pass over the
// membership map, where one after the other each would read all of it. A
// job whose members can't be read has none.
func listAll(jobs []*job.Job) [][]lineage.Member {
	out := make([][]lineage.Member, len(jobs))
	var wg sync.WaitGroup
	slots := make(chan struct{}, parallelLists)
	for i, j := range jobs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			out[i], _ = j.Members()
		})
	}
	wg.Wait()
	return out
}

// mayChange refuses a caller that is itself a tracked process: a job may
// not untrack, keep, end or close anything, so it can't free itself.
func (s *Server) mayChange(p Peer, what string) error {
	sess, err := s.trackedSession(p)
	if err != nil {
		return err
	}
	if sess != "" {
		return forbidden("caller pid %d is tracked in session %q: a tracked process may not %s", p.PID, sess, what)
	}
	return nil
}

// mayRegister refuses a process the caller does not own (real uid).
func (s *Server) mayRegister(p Peer, id lineage.Identity) error {
	if p.Root() {
		return nil
	}
	uids, err := s.proc.UIDs(int(id.PID))
	if err != nil {
		return err
	}
	if uids.Real != p.UID {
		return forbidden("process %s belongs to uid %d: caller uid %d may register only its own processes", id, uids.Real, p.UID)
	}
	return nil
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
