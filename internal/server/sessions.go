package server

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// session is one session's state. Its fields are guarded by reg.mu;
// op serialises the work that touches its roots (register, end, close,
// untrack), which may take long and is done without reg.mu.
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
	// closing is set when its close begins, and saved before anything is
	// reaped: a daemon restarted after a crash finishes the close. A
	// closing session takes no new root, keep or child session.
	closing bool
	// closed is set once it is gone from Server.sessions.
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
	// orphanage is the process the root's orphans go to, nil if none
	// was declared.
	orphanage *lineage.Identity
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

// view is the session as the API shows it. Call with reg.mu held.
func (se *session) view() api.Session {
	v := api.Session{
		ID: se.id, Kind: se.kind.String(), Label: se.label, Parent: se.parent, Owner: se.owner,
		SelfClose: se.selfClose, UID: se.uid, Opened: se.opened, Roots: []api.Root{}, Keeps: []api.Keep{}, Closing: se.closing,
	}
	for id, r := range se.roots {
		v.Roots = append(v.Roots, r.view(id, se.id))
	}
	slices.SortFunc(v.Roots, func(a, b api.Root) int { return lineage.Compare(a.Root, b.Root) })
	now := time.Now()
	for _, k := range se.keeps {
		if k.live(now) {
			v.Keeps = append(v.Keeps, k.view())
		}
	}
	return v
}

func (r *root) view(id lineage.Identity, sess string) api.Root {
	return api.Root{Root: id, Session: sess, Label: r.label, Command: r.command, Added: r.added, Orphanage: r.orphanage}
}

func (k keep) view() api.Keep {
	v := api.Keep{Rule: k.rule.String()}
	if !k.expires.IsZero() {
		e := k.expires
		v.Expires = &e
	}
	return v
}

// keepRules are the session's live keep rules. Call with reg.mu held.
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

// lookup returns the session id that p may see. Another uid's session is,
// to a caller other than root, as one that doesn't exist: the same 404.
// Call with reg.mu held.
func (s *Server) lookup(id string, p Peer) (*session, error) {
	se, ok := s.reg.sessions[id]
	if !ok || se.closed || !se.visible(p) {
		return nil, notFound("no session %q", id)
	}
	return se, nil
}

// lookupOpen is lookup for a change: a closing session is refused (409).
// Call with reg.mu held.
func (s *Server) lookupOpen(id string, p Peer) (*session, error) {
	se, err := s.lookup(id, p)
	if err == nil && se.closing {
		return nil, conflict("session %q is closing", id)
	}
	return se, err
}

// taken is the refusal of a session id in use, whoever uses it: it names
// no owner.
func taken(id string) error {
	return conflict("session id %q is taken: choose another", id)
}

// newSession adds a session for p, within p's quotas (the session, its
// keep rules, its owner watch, its record). A parent must be open: a
// child of a closing parent would be left behind by its close. Call with
// reg.mu held.
func (s *Server) newSession(req api.OpenSession, p Peer) (*session, error) {
	if req.ID == "" {
		for {
			s.reg.nextID++
			req.ID = "s" + strconv.Itoa(s.reg.nextID)
			if _, taken := s.reg.sessions[req.ID]; !taken {
				break
			}
		}
	}
	if _, ok := s.reg.sessions[req.ID]; ok {
		return nil, taken(req.ID)
	}
	if uid, writing := s.records.closingUID(req.ID); writing && uid != p.UID {
		// The closed session's record takes its late events for a few
		// seconds more, by id: another uid's would be written into it.
		return nil, taken(req.ID)
	}
	if req.Parent != "" {
		if _, err := s.lookupOpen(req.Parent, p); err != nil {
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
	if err := s.takeSession(se); err != nil {
		return nil, err
	}
	s.reg.sessions[se.id] = se
	s.touch(se)
	return se, nil
}

// takeSession counts se against its uid's quotas, all or none.
func (s *Server) takeSession(se *session) error {
	type held struct {
		l limit
		n int
	}
	want := []held{{limitSessions, 1}, {limitKeeps, len(se.keeps)}}
	if se.owner != nil {
		want = append(want, held{limitOwnerWatches, 1})
	}
	if s.records != nil {
		want = append(want, held{limitRecords, 1})
	}
	for i, h := range want {
		if err := s.usage.take(se.uid, h.l, h.n); err != nil {
			for _, g := range want[:i] {
				s.usage.give(se.uid, g.l, g.n)
			}
			return err
		}
	}
	return nil
}

// forceSession counts a restored se against its uid's quotas, whatever
// they are: the daemon holds it already.
func (s *Server) forceSession(se *session) {
	s.usage.force(se.uid, limitSessions, 1)
	s.usage.force(se.uid, limitKeeps, len(se.keeps))
	if se.owner != nil {
		s.usage.force(se.uid, limitOwnerWatches, 1)
	}
	if s.records != nil {
		s.usage.force(se.uid, limitRecords, 1)
	}
}

// removeSession takes se out of the open sessions, stops watching its
// owner and counts what it held as closed; its record is closed later
// (records.closeLater), and counted as closed then. Removing a session
// twice does nothing. Call with reg.mu held.
func (s *Server) removeSession(se *session) {
	if se.closed {
		return
	}
	se.closed = true
	se.stopOwner()
	if s.reg.sessions[se.id] == se {
		delete(s.reg.sessions, se.id)
		s.touch(se)
	}
	s.usage.give(se.uid, limitSessions, 1)
	s.usage.give(se.uid, limitKeeps, len(se.keeps))
	if se.owner != nil {
		s.usage.give(se.uid, limitOwnerWatches, 1)
	}
	s.records.closeLater(se.id, se.uid)
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
	s.reg.mu.Lock()
	se, err := s.newSession(req, p)
	if err == nil && se.owner != nil {
		if err = s.watchOwner(se); err != nil {
			s.removeSession(se)
		}
	}
	var v api.Session
	if err == nil {
		v = se.view()
	}
	s.reg.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	s.save()
	return http.StatusCreated, v, nil
}

func (s *Server) listSessions(r *http.Request, p Peer) (int, any, error) {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	out := []api.Session{}
	for _, se := range s.reg.sessions {
		if se.visible(p) {
			out = append(out, se.view())
		}
	}
	slices.SortFunc(out, func(a, b api.Session) int { return a.Opened.Compare(b.Opened) })
	return http.StatusOK, out, nil
}

func (s *Server) getSession(r *http.Request, p Peer) (int, any, error) {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	se, err := s.lookup(r.PathValue("id"), p)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, se.view(), nil
}

// children returns the ids of id's open child sessions. Call with
// reg.mu held.
func (s *Server) children(id string) []string {
	var out []string
	for cid, se := range s.reg.sessions {
		if se.parent == id && !se.closed {
			out = append(out, cid)
		}
	}
	slices.Sort(out)
	return out
}
