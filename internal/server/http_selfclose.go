package server

import (
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// closable returns session id for a caller that may close it, with the
// keep rules that close must add. A caller outside every lineage may close
// any session it sees, sparing nothing more. A member may close only the
// session it is a member of, and only when that session was opened with
// SelfClose: that close spares the caller's chain (see callerChain). Any
// other tracked caller is refused, as for every change.
func (s *Server) closable(id string, p Peer) (*session, policy.KeepRules, error) {
	s.reg.mu.Lock()
	se, err := s.lookup(id, p)
	s.reg.mu.Unlock()
	if err != nil {
		return nil, nil, err
	}
	sess, err := s.trackedSession(p)
	if err != nil {
		return nil, nil, err
	}
	if sess == "" {
		return se, nil, nil
	}
	s.reg.mu.Lock()
	self := se.selfClose
	s.reg.mu.Unlock()
	if sess != se.id || !self {
		return nil, nil, forbidden("caller pid %d is tracked%s: a tracked process may close only its own session, and only one opened with self_close", p.PID, s.inSession(sess, p))
	}
	spare, err := s.callerChain(p, se)
	if err != nil {
		return nil, nil, err
	}
	return se, spare, nil
}

// callerChain returns keep rules for the caller and its lineage parents,
// as far as they are live members of one of se's roots, and for that root:
// a CI runner's job-completed hook, the processes it runs through, and the
// runner's worker that registered as the root all outlive the close.
func (s *Server) callerChain(p Peer, se *session) (policy.KeepRules, error) {
	caller, err := s.proc.Identity(p.PID)
	if err != nil {
		return nil, forbidden("caller pid %d can't be identified: %v", p.PID, err)
	}
	for _, e := range s.rootsOf(se) {
		ms, err := e.rt.job.Members()
		if err != nil {
			continue
		}
		parent := make(map[lineage.Identity]lineage.Identity, len(ms))
		for _, m := range ms {
			parent[m.Identity] = m.Parent
		}
		if _, ok := parent[caller]; !ok && caller != e.id {
			continue
		}
		chain := []lineage.Identity{e.id}
		for id := caller; id != e.id; {
			next, ok := parent[id]
			if !ok {
				break
			}
			chain = append(chain, id)
			delete(parent, id) // a cycle ends the walk
			id = next
		}
		return keepAll(chain)
	}
	return nil, forbidden("caller pid %d is no longer a member of session %q", p.PID, se.id)
}

// keepAll returns one identity keep rule per id.
func keepAll(ids []lineage.Identity) (policy.KeepRules, error) {
	rules := make(policy.KeepRules, 0, len(ids))
	for _, id := range ids {
		k, err := policy.KeepIdentity(id)
		if err != nil {
			return nil, err
		}
		rules = append(rules, k)
	}
	return rules, nil
}
