package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// identityOf returns the identity of the live process pid, checked against
// start when start is given.
func (s *Server) identityOf(pid int64, start uint64) (lineage.Identity, error) {
	if start == 0 {
		return s.proc.Identity(int(pid))
	}
	id := lineage.Identity{PID: uint32(pid), StartTicks: start}
	return id, s.proc.Check(id)
}

// refuseThread refuses a thread's id, st its status: it names no process
// (a thread's forks are its process's), and a root of it would track
// nothing.
func refuseThread(pid int64, st proc.Status) error {
	if st.Tgid != 0 && int64(st.Tgid) != pid {
		return fmt.Errorf("%w: pid %d is a thread of process %d, not a process: register the process", lineage.ErrInvalid, pid, st.Tgid)
	}
	return nil
}

func (s *Server) addRoot(r *http.Request, p Peer) (int, any, error) {
	req, err := DecodeAddRoot(r.Body)
	if err != nil {
		return 0, nil, err
	}
	st, err := s.proc.Status(int(req.PID))
	if err == nil {
		err = s.mayRegister(p, req.PID, st.UIDs)
	}
	if err == nil {
		err = refuseThread(req.PID, st)
	}
	if err != nil {
		return 0, nil, fmt.Errorf("register: %w", err)
	}
	id, err := s.identityOf(req.PID, req.Start)
	if err != nil {
		return 0, nil, fmt.Errorf("register: %w", err)
	}
	var orphanage *lineage.Identity
	if req.Orphanage {
		if orphanage, err = s.callerAsOrphanage(p, id); err != nil {
			return 0, nil, err
		}
	}
	se, created, err := s.sessionForRoot(req, p)
	if err != nil {
		return 0, nil, err
	}
	v, err := s.register(se, id, req.Label, req.Command, orphanage)
	if errors.Is(err, loader.ErrAlreadyTracked) {
		// An armed process's child that registers itself (lineage exec
		// under the pytest plugin) is the root it asks to be.
		v, err = s.rebindArmed(se, id, req.Label, req.Command, p)
	}
	if errors.Is(err, loader.ErrAlreadyTracked) && !p.Root() {
		// Which root tracks it may be another uid's to know.
		err = conflict("register %s: the process is tracked already", id)
	}
	if err != nil {
		if created {
			s.dropIfEmpty(se)
		}
		return 0, nil, err
	}
	s.save()
	return http.StatusCreated, v, nil
}

// callerAsOrphanage returns the identity of p, which declares itself the
// orphanage of root: refused unless p is root's parent.
func (s *Server) callerAsOrphanage(p Peer, root lineage.Identity) (*lineage.Identity, error) {
	st, err := s.proc.Stat(int(root.PID))
	if err != nil {
		return nil, fmt.Errorf("register: %w", err)
	}
	if p.PID <= 0 || st.PPID != p.PID {
		return nil, fmt.Errorf("%w orphanage: the caller (pid %d) is not the parent of %s (its parent is pid %d)", lineage.ErrInvalid, p.PID, root, st.PPID)
	}
	id, err := s.proc.Identity(p.PID)
	if err != nil {
		return nil, fmt.Errorf("register: orphanage: %w", err)
	}
	return &id, nil
}

// sessionForRoot returns the session a new root joins, opening it when it
// doesn't exist. A session's name is its opener's: only its uid adds roots
// to it. Root joins another uid's session only when it asks to (Join);
// any other uid is told the id is taken, as by an open of that id. A
// kind, an owner or keep rules given for a session that exists must be
// its own: they are set when it opens, and a turn end or a close that
// did otherwise than the caller asked would reap what it meant to spare,
// or spare what it meant to reap.
func (s *Server) sessionForRoot(req api.AddRoot, p Peer) (*session, bool, error) {
	var err error
	if req.Keep, err = s.resolveKeeps(req.Keep); err != nil {
		return nil, false, err
	}
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	if se, ok := s.reg.sessions[req.Session]; ok {
		switch {
		case se.uid != p.UID && !p.Root():
			return nil, false, taken(req.Session)
		case se.uid != p.UID && !req.Join:
			return nil, false, conflict("session %q was opened by uid %d: root joins another uid's session only when it asks to (lineage exec --join, lineage roots add --join, \"join\": true)", se.id, se.uid)
		case se.closing:
			return nil, false, conflict("session %q is closing", se.id)
		case req.Kind != "" && parseKind(req.Kind) != se.kind:
			// A turn end would do otherwise than the caller expects.
			return nil, false, conflict("session %q is %s, not %s: a session's kind is set when it opens", se.id, se.kind, req.Kind)
		case req.Owner != nil && (se.owner == nil || *se.owner != *req.Owner):
			return nil, false, conflict("session %q %s, not %s: a session's owner is set when it opens", se.id, ownerText(se.owner), req.Owner)
		case !se.holdsKeeps(req.Keep):
			return nil, false, conflict("session %q exists: add keep rules to it with POST /v1/keeps (lineage keep), not with a root", se.id)
		}
		return se, false, nil
	}
	if req.Join {
		return nil, false, notFound("no session %q to join", req.Session)
	}
	se, err := s.newSession(api.OpenSession{ID: req.Session, Kind: req.Kind, Label: req.Label, Owner: req.Owner, Keep: req.Keep}, p)
	if err == nil && se.owner != nil {
		if err = s.watchOwner(se); err != nil {
			s.removeSession(se)
		}
	}
	return se, err == nil, err
}

// register makes id a root of se, serialised with se's ends and close;
// orphanage, when not nil, is the process its orphans go to.
func (s *Server) register(se *session, id lineage.Identity, label string, command []string, orphanage *lineage.Identity) (api.Root, error) {
	se.op.Lock()
	defer se.op.Unlock()
	s.reg.mu.Lock()
	closing := se.closing || se.closed
	s.reg.mu.Unlock()
	if closing {
		return api.Root{}, conflict("session %q is closing", se.id)
	}
	// Indexed first (unless another session's root still is), so that
	// the session's streams and record get the lineage's events from its
	// first fork.
	_, had := s.reg.rootSession.LoadOrStore(id, se.id)
	opts := tracker.RegisterOptions{Command: command}
	if orphanage != nil {
		opts.Orphanage = *orphanage
	}
	j, err := s.tracker.Register(id, opts)
	if err != nil {
		if !had {
			s.reg.rootSession.Delete(id)
		}
		return api.Root{}, fmt.Errorf("register: %w", err)
	}
	rt := &root{job: j, label: label, added: time.Now(), command: command, orphanage: orphanage}
	if command == nil {
		rt.command = j.Report().Command // as the job read it from /proc
	}
	s.reg.mu.Lock()
	se.roots[id] = rt
	s.touch(se)
	s.reg.rootSession.Store(id, se.id)
	v := rt.view(id, se.id)
	rules := se.keepRules()
	s.reg.mu.Unlock()
	s.keepInKernel(se, rules, []rootEntry{{id, rt}})
	return v, nil
}

// dropIfEmpty removes a session that was opened for a root that then
// could not be registered.
func (s *Server) dropIfEmpty(se *session) {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	if len(se.roots) == 0 && len(s.children(se.id)) == 0 && !se.closed {
		s.removeSession(se)
		s.hub.endSession(se)
	}
}

func (s *Server) listRoots(r *http.Request, p Peer) (int, any, error) {
	want := r.URL.Query().Get("session")
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	if want != "" {
		if _, err := s.lookup(want, p); err != nil {
			return 0, nil, err
		}
	}
	out := []api.Root{}
	for sid, se := range s.reg.sessions {
		if !se.visible(p) || (want != "" && sid != want) {
			continue
		}
		for id, rt := range se.roots {
			out = append(out, rt.view(id, sid))
		}
	}
	slices.SortFunc(out, func(a, b api.Root) int { return lineage.Compare(a.Root, b.Root) })
	return http.StatusOK, out, nil
}

// findRoot returns the root id and its session, for p: another uid's root
// is, to a caller other than root, as one that doesn't exist.
func (s *Server) findRoot(id lineage.Identity, p Peer) (*session, *root, error) {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	if sid, ok := s.reg.rootSession.Load(id); ok {
		if se := s.reg.sessions[sid.(string)]; se != nil && se.visible(p) {
			if rt, ok := se.roots[id]; ok {
				return se, rt, nil
			}
		}
	}
	return nil, nil, notFound("no root %s", id)
}

func (s *Server) getRoot(r *http.Request, p Peer) (int, any, error) {
	id, err := parseIdentityPath(r)
	if err != nil {
		return 0, nil, err
	}
	se, rt, err := s.findRoot(id, p)
	if err != nil {
		return 0, nil, err
	}
	live, err := rt.job.Live()
	if err != nil {
		return 0, nil, err
	}
	s.reg.mu.Lock()
	v := rt.view(id, se.id)
	s.reg.mu.Unlock()
	v.Members = []api.Member{}
	for _, l := range live {
		v.Members = append(v.Members, api.Member{Process: l.Identity, Parent: l.Parent, Comm: l.Comm, Argv: l.Argv, Age: l.Age})
	}
	return http.StatusOK, v, nil
}

func (s *Server) removeRoot(r *http.Request, p Peer) (int, any, error) {
	id, err := parseIdentityPath(r)
	if err != nil {
		return 0, nil, err
	}
	se, rt, err := s.findRoot(id, p)
	if err != nil {
		return 0, nil, err
	}
	if err := s.mayChange(p, "untrack"); err != nil {
		return 0, nil, err
	}
	se.op.Lock()
	defer se.op.Unlock()
	s.reg.mu.Lock()
	_, still := se.roots[id]
	delete(se.roots, id)
	s.touch(se)
	s.reg.mu.Unlock()
	s.unindex(id)
	if !still {
		return 0, nil, notFound("no root %s", id)
	}
	if err := rt.job.Close(); err != nil {
		s.note("lineage: untrack %s: %v\n", id, err)
	}
	s.save()
	return http.StatusOK, rt.view(id, se.id), nil
}

// ownerText says whose exit closes a session, for a refusal.
func ownerText(owner *lineage.Identity) string {
	if owner == nil {
		return "has no owner"
	}
	return "is owned by " + owner.String()
}

// holdsKeeps says whether every one of rules is one of se's live keep
// rules (none is). Call with reg.mu held.
func (se *session) holdsKeeps(rules []policy.Keep) bool {
	now := time.Now()
	for _, r := range rules {
		if !slices.ContainsFunc(se.keeps, func(k keep) bool { return k.rule == r && k.live(now) }) {
			return false
		}
	}
	return true
}
