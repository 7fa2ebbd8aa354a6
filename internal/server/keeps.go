package server

import (
	"net/http"
	"slices"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/policy"
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
	s.mu.Lock()
	if se.closed {
		s.mu.Unlock()
		return 0, nil, notFound("no session %q", se.id)
	}
	se.keeps = append(se.keeps, k)
	s.mu.Unlock()
	s.hub.kept(se.id, m, "keep "+rule.String())
	if ttl > 0 {
		s.expireLater(se, m.Identity, k)
	}
	s.save()
	return http.StatusCreated, k.view(), nil
}

// expireLater drops k from se when it expires, and says so in the event
// stream. A server that closed first does nothing.
func (s *Server) expireLater(se *session, id lineage.Identity, k keep) {
	time.AfterFunc(time.Until(k.expires), func() {
		s.bgMu.RLock()
		defer s.bgMu.RUnlock()
		if s.bgClosed {
			return
		}
		s.mu.Lock()
		n := len(se.keeps)
		se.keeps = slices.DeleteFunc(se.keeps, func(x keep) bool { return x == k })
		gone := len(se.keeps) < n && !se.closed
		s.mu.Unlock()
		if gone {
			s.hub.kept(se.id, lineage.Member{Identity: id}, "keep expired "+k.rule.String())
			s.save()
		}
	})
}

// sessionOfMember finds the session whose lineage id belongs to, for p.
func (s *Server) sessionOfMember(id lineage.Identity, p Peer) (*session, lineage.Member, error) {
	if err := s.proc.Check(id); err != nil {
		return nil, lineage.Member{}, err
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
	if sid, _ := s.trackedSessionOf(id); sid != "" {
		return nil, lineage.Member{}, forbidden("process %s is in session %q, which caller uid %d may not use", id, sid, p.UID)
	}
	return nil, lineage.Member{}, notFound("process %s is in no session", id)
}

// visibleSessions is a snapshot of the open sessions p may see.
func (s *Server) visibleSessions(p Peer) []*session {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*session
	for _, se := range s.sessions {
		if se.visible(p) && !se.closed {
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
	s.mu.Lock()
	se, k, err := s.takeKeep(rule, p)
	s.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	if !id.IsZero() {
		s.hub.unkept(se.id, lineage.Member{Identity: id}, "unkeep "+rule.String())
	}
	s.save()
	return http.StatusOK, k.view(), nil
}

// takeKeep removes every keep of rule from the open session p may see
// that holds it live, and returns the session and a keep removed. Rules
// compare by their text: an exe rule the session resolved is the rule as
// it was asked for. Call with Server.mu held.
func (s *Server) takeKeep(rule policy.Keep, p Peer) (*session, keep, error) {
	var other *session
	now := time.Now()
	text := rule.String()
	for _, se := range s.sessions {
		i := slices.IndexFunc(se.keeps, func(k keep) bool { return k.rule.String() == text && k.live(now) })
		if i < 0 || se.closed {
			continue
		}
		if !se.visible(p) {
			other = se
			continue
		}
		k := se.keeps[i]
		se.keeps = slices.DeleteFunc(se.keeps, func(k keep) bool { return k.rule.String() == text })
		return se, k, nil
	}
	if other != nil {
		return nil, keep{}, forbidden("keep %s is in session %q of uid %d: caller uid %d may not use it", rule, other.id, other.uid, p.UID)
	}
	return nil, keep{}, notFound("no keep %s", rule)
}
