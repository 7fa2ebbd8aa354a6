package server

import (
	"net/http"
	"slices"
	"time"

	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// addKeep spares a process (or a root's lineage) from the reaps of the
// session it belongs to. A keep only ever spares.
func (s *Server) addKeep(r *http.Request, p Peer) (int, any, error) {
	req, id, rule, ttl, err := DecodeAddKeep(r.Body)
	if err != nil {
		return 0, nil, err
	}
	if err := s.mayChange(p, "keep"); err != nil {
		return 0, nil, err
	}
	var se *session
	m := lineage.Member{Identity: id, Root: id}
	if req.Root {
		// A root's lineage may outlive the root process itself.
		se, _, err = s.findRoot(id, p)
	} else {
		se, m, err = s.sessionOfMember(id, p)
	}
	if err != nil {
		return 0, nil, err
	}
	k := keep{rule: rule}
	if ttl > 0 {
		k.expires = time.Now().Add(ttl)
	}
	s.reg.mu.Lock()
	k, err = s.addKeepTo(se, k)
	s.reg.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	roots := s.rootsOf(se)
	if _, one := k.rule.Process(); one {
		// Only the lineage it is a member of has it.
		roots = slices.DeleteFunc(roots, func(e rootEntry) bool { return e.id != m.Root })
	}
	s.keepInKernel(se, policy.KeepRules{k.rule}, roots)
	s.hub.kept(se.id, m, "keep "+rule.String())
	if !k.expires.IsZero() {
		s.expireLater(se, m.Identity, k)
	}
	s.save()
	return http.StatusCreated, k.view(), nil
}

// addKeepTo adds k to se's keeps, within its uid's quota, and returns the
// keep that holds: a rule se holds live already is not added again, but
// lives on until the later of the two expiries (none is the latest). Call
// with reg.mu held.
func (s *Server) addKeepTo(se *session, k keep) (keep, error) {
	if se.closed {
		return keep{}, notFound("no session %q", se.id)
	}
	if se.closing {
		return keep{}, conflict("session %q is closing", se.id)
	}
	now := time.Now()
	for i, old := range se.keeps {
		if old.rule != k.rule || !old.live(now) {
			continue
		}
		if old.expires.IsZero() || (!k.expires.IsZero() && !k.expires.After(old.expires)) {
			return old, nil
		}
		se.keeps[i].expires = k.expires
		s.touch(se)
		return se.keeps[i], nil
	}
	if err := s.usage.take(se.uid, limitKeeps, 1); err != nil {
		return keep{}, err
	}
	se.keeps = append(se.keeps, k)
	s.touch(se)
	return k, nil
}

// expireLater drops k from se when it expires, and says so in the event
// stream. A server that closed first does nothing.
func (s *Server) expireLater(se *session, id lineage.Identity, k keep) {
	time.AfterFunc(time.Until(k.expires), func() {
		s.life.inBackground(func() {
			s.reg.mu.Lock()
			gone := s.dropKeeps(se, func(x keep) bool { return x == k }) > 0 && !se.closed
			s.reg.mu.Unlock()
			if gone {
				s.unkeepInKernel(se, k.rule)
				s.hub.kept(se.id, lineage.Member{Identity: id}, "keep expired "+k.rule.String())
				s.save()
			}
		})
	})
}

// dropKeeps removes se's keeps that match drop, counts them as closed and
// says how many there were. Call with reg.mu held.
func (s *Server) dropKeeps(se *session, drop func(keep) bool) int {
	n := len(se.keeps)
	se.keeps = slices.DeleteFunc(se.keeps, drop)
	gone := n - len(se.keeps)
	if gone > 0 && !se.closed {
		s.usage.give(se.uid, limitKeeps, gone)
		s.touch(se)
	}
	return gone
}

// sessionOfMember finds the session whose lineage id belongs to, for p. A
// process of another uid's session is, to a caller other than root, as
// one in no session, as is one that doesn't exist: the same 404.
func (s *Server) sessionOfMember(id lineage.Identity, p Peer) (*session, lineage.Member, error) {
	none := notFound("process %s is in no session", id)
	if err := s.proc.Check(id); err != nil {
		return nil, lineage.Member{}, none
	}
	for _, se := range s.visibleSessions(p) {
		for _, e := range s.rootsOf(se) {
			ms, err := e.rt.job.Members()
			if err != nil {
				continue
			}
			for _, m := range ms {
				if m.Identity == id {
					return se, m, nil
				}
			}
		}
	}
	return nil, lineage.Member{}, none
}

// visibleSessions is a snapshot of the open sessions p may see.
func (s *Server) visibleSessions(p Peer) []*session {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	var out []*session
	for _, se := range s.reg.sessions {
		if se.visible(p) {
			out = append(out, se)
		}
	}
	return out
}

// removeKeep ends the keeps of one rule (PID@START, root:PID@START or
// exe:PATH, as the session shows them) in the session that holds them.
// Nothing is signalled: what the rule spared is a candidate again at the
// session's next turn end or close. The removal of a rule on a process is
// in the event stream (an exe rule names no process, as at its start).
func (s *Server) removeKeep(r *http.Request, p Peer) (int, any, error) {
	id, rule, err := DecodeKeepRule(r.PathValue("rule"))
	if err != nil {
		return 0, nil, err
	}
	if err := s.mayChange(p, "remove a keep"); err != nil {
		return 0, nil, err
	}
	s.reg.mu.Lock()
	se, k, err := s.takeKeep(rule, p)
	s.reg.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	s.unkeepInKernel(se, k.rule)
	if !id.IsZero() {
		s.hub.unkept(se.id, lineage.Member{Identity: id}, "unkeep "+rule.String())
	}
	s.save()
	return http.StatusOK, k.view(), nil
}

// takeKeep removes every keep of rule from the open session p may see
// that holds it live, and returns the session and a keep removed. Rules
// compare by their text: an exe rule the session resolved is the rule as
// it was asked for. Another uid's keep is, to a caller other than root, as
// one that doesn't exist. Call with reg.mu held.
func (s *Server) takeKeep(rule policy.Keep, p Peer) (*session, keep, error) {
	now := time.Now()
	text := rule.String()
	for _, se := range s.reg.sessions {
		if !se.visible(p) {
			continue
		}
		i := slices.IndexFunc(se.keeps, func(k keep) bool { return k.rule.String() == text && k.live(now) })
		if i < 0 {
			continue
		}
		if se.closing {
			return nil, keep{}, conflict("session %q is closing", se.id)
		}
		k := se.keeps[i]
		s.dropKeeps(se, func(k keep) bool { return k.rule.String() == text })
		return se, k, nil
	}
	return nil, keep{}, notFound("no keep %s", rule)
}
