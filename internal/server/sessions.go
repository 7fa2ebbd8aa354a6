package server

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/policy"
	"github.com/lineage-dev/lineage/internal/tracker"
)

// session is one session's state. Its fields are guarded by Server.mu;
// op serialises the work that touches its roots (register, end, close,
// untrack), which may take long and is done without Server.mu.
type session struct {
	id     string
	kind   policy.Kind
	label  string
	parent string
	owner  *lineage.Identity
	uid    uint32
	opened time.Time
	roots  map[lineage.Identity]*root
	keeps  []keep
	closed bool

	op         sync.Mutex
	ownerWatch func()

	// selfClose: a member may close the session (see OpenSession).
	selfClose bool
}

// root is one registered root.
type root struct {
	job     *tracker.Job
	label   string
	command []string
	added   time.Time
}

// keep is one keep request; a zero expires never ends.
type keep struct {
	rule    policy.Keep
	expires time.Time
}

func (k keep) live(now time.Time) bool { return k.expires.IsZero() || now.Before(k.expires) }

func (se *session) stopOwner() {
	if se.ownerWatch != nil {
		se.ownerWatch()
		se.ownerWatch = nil
	}
}

// view is the session as the API shows it. Call with Server.mu held.
func (se *session) view() Session {
	v := Session{
		ID: se.id, Kind: se.kind.String(), Label: se.label, Parent: se.parent, Owner: se.owner,
		SelfClose: se.selfClose, UID: se.uid, Opened: se.opened, Roots: []Root{}, Keeps: []Keep{}, Closing: se.closed,
	}
	for id, r := range se.roots {
		v.Roots = append(v.Roots, r.view(id, se.id))
	}
	slices.SortFunc(v.Roots, func(a, b Root) int { return lineage.Compare(a.Root, b.Root) })
	now := time.Now()
	for _, k := range se.keeps {
		if k.live(now) {
			v.Keeps = append(v.Keeps, k.view())
		}
	}
	return v
}

func (r *root) view(id lineage.Identity, sess string) Root {
	return Root{Root: id, Session: sess, Label: r.label, Command: r.command, Added: r.added}
}

func (k keep) view() Keep {
	v := Keep{Rule: k.rule.String()}
	if !k.expires.IsZero() {
		e := k.expires
		v.Expires = &e
	}
	return v
}

// keepRules are the session's live keep rules. Call with Server.mu held.
func (se *session) keepRules() policy.KeepRules {
	var rules policy.KeepRules
	now := time.Now()
	for _, k := range se.keeps {
		if k.live(now) {
			rules = append(rules, k.rule)
		}
	}
	return rules
}

// visible reports whether p may see se.
func (se *session) visible(p Peer) bool { return p.Root() || se.uid == p.UID }

// lookup returns the session id that p may see. Call with Server.mu held.
func (s *Server) lookup(id string, p Peer) (*session, error) {
	se, ok := s.sessions[id]
	if !ok || se.closed {
		return nil, notFound("no session %q", id)
	}
	if !se.visible(p) {
		return nil, forbidden("session %q was opened by uid %d: caller uid %d may not use it", id, se.uid, p.UID)
	}
	return se, nil
}

// newSession adds a session for p. Call with Server.mu held.
func (s *Server) newSession(req OpenSession, p Peer) (*session, error) {
	if req.ID == "" {
		for {
			s.nextID++
			req.ID = "s" + strconv.Itoa(s.nextID)
			if _, taken := s.sessions[req.ID]; !taken {
				break
			}
		}
	}
	if _, taken := s.sessions[req.ID]; taken {
		return nil, conflict("session %q exists", req.ID)
	}
	if req.Parent != "" {
		if _, err := s.lookup(req.Parent, p); err != nil {
			return nil, fmt.Errorf("parent: %w", err)
		}
	}
	se := &session{
		id: req.ID, kind: parseKind(req.Kind), label: req.Label, parent: req.Parent, owner: req.Owner,
		selfClose: req.SelfClose, uid: p.UID, opened: time.Now(), roots: make(map[lineage.Identity]*root),
	}
	// exe rules come resolved (resolveKeeps).
	for _, k := range req.Keep {
		se.keeps = append(se.keeps, keep{rule: k})
	}
	s.sessions[se.id] = se
	return se, nil
}

// resolveKeeps resolves the exe rules a session opens with, once, before
// the session exists: each names its program as resolved, and one whose
// path names no executable file is refused.
func (s *Server) resolveKeeps(rules []policy.Keep) ([]policy.Keep, error) {
	return policy.KeepRules(rules).ResolveExe(s.proc.ExeFile)
}

func (s *Server) openSession(r *http.Request, p Peer) (int, any, error) {
	req, err := DecodeOpenSession(r.Body)
	if err != nil {
		return 0, nil, err
	}
	if req.Keep, err = s.resolveKeeps(req.Keep); err != nil {
		return 0, nil, err
	}
	if req.Owner != nil {
		if err := s.proc.Check(*req.Owner); err != nil {
			return 0, nil, fmt.Errorf("owner: %w", err)
		}
	}
	s.mu.Lock()
	se, err := s.newSession(req, p)
	if err == nil && se.owner != nil {
		err = s.watchOwner(se)
		if err != nil {
			delete(s.sessions, se.id)
		}
	}
	var v Session
	if err == nil {
		v = se.view()
	}
	s.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	s.save()
	return http.StatusCreated, v, nil
}

func (s *Server) listSessions(r *http.Request, p Peer) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []Session{}
	for _, se := range s.sessions {
		if se.visible(p) && !se.closed {
			out = append(out, se.view())
		}
	}
	slices.SortFunc(out, func(a, b Session) int { return a.Opened.Compare(b.Opened) })
	return http.StatusOK, out, nil
}

func (s *Server) getSession(r *http.Request, p Peer) (int, any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	se, err := s.lookup(r.PathValue("id"), p)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, se.view(), nil
}

// children returns the ids of id's open child sessions. Call with
// Server.mu held.
func (s *Server) children(id string) []string {
	var out []string
	for cid, se := range s.sessions {
		if se.parent == id && !se.closed {
			out = append(out, cid)
		}
	}
	slices.Sort(out)
	return out
}
