package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
)

// Arms per process. A process arms itself for a session (POST /v1/arms);
// the kernel then makes whatever it forks, from any thread, a new root
// before its first instruction, marked with the session's cookie; the
// daemon claims those roots for the session (claimArmed) before anything
// reads or ends it, from the kernel's roots map, so a lost fork event
// loses no root. A process re-arms for another session (the next test),
// disarms (DELETE /v1/arms), or dies, and its arm goes; a session's close
// disarms what is armed for it before it ends its roots.

// armsState maps the sessions to their cookies, and the armed processes
// to what they are armed for. Its own lock; never held across a call to
// the tracker.
type armsState struct {
	// ready is set once Server.tracker is: the tracker's first events
	// (a pinned ring buffer's backlog) may come before.
	ready    atomic.Bool
	mu       sync.Mutex
	next     uint32
	cookies  map[uint32]*session
	cookieOf map[*session]uint32
	procs    map[lineage.Identity]*armedProc
}

// armedProc is one armed process: the session it is armed for, and the
// watch that disarms it when it exits.
type armedProc struct {
	session *session
	stop    func()
	// uid is whose watch it is: it counts as one of the uid's owner
	// watches (a pidfd and a goroutine, as a session's owner holds).
	uid uint32
}

// cookie returns se's cookie, making one.
func (a *armsState) cookie(se *session) uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.cookieOf[se]; ok {
		return c
	}
	if a.cookies == nil {
		a.cookies, a.cookieOf, a.procs = map[uint32]*session{}, map[*session]uint32{}, map[lineage.Identity]*armedProc{}
	}
	for {
		a.next++
		if _, taken := a.cookies[a.next]; a.next != 0 && !taken {
			break
		}
	}
	a.cookies[a.next], a.cookieOf[se] = se, a.next
	return a.next
}

// cookieOfSession is se's cookie, 0 when it has none.
func (a *armsState) cookieOfSession(se *session) uint32 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cookieOf[se]
}

// sessionOf is the session of cookie, nil when none.
func (a *armsState) sessionOf(cookie uint32) *session {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cookies[cookie]
}

// DecodeArm reads and checks the body of POST /v1/arms.
func DecodeArm(r io.Reader) (api.Arm, error) {
	var req api.Arm
	if err := decodeBody(r, &req); err != nil {
		return req, err
	}
	if err := api.CheckSessionID(req.Session); err != nil {
		return req, err
	}
	if err := checkKind(req.Kind); err != nil {
		return req, err
	}
	if len(req.Label) > 256 {
		return req, fmt.Errorf("%w label: over 256 bytes", lineage.ErrInvalid)
	}
	return req, nil
}

// callerIdentity is the identity of the process at the other end of the
// request's connection.
func (s *Server) callerIdentity(p Peer) (lineage.Identity, error) {
	id, err := s.proc.Identity(p.PID)
	if err != nil {
		return id, forbidden("caller pid %d can't be identified: %v", p.PID, err)
	}
	return id, nil
}

// arm answers POST /v1/arms: it arms the caller itself, never another
// process, for a session it may use (opened when it doesn't exist). A
// tracked caller is refused: what it forks is its own root's already.
func (s *Server) arm(r *http.Request, p Peer) (int, any, error) {
	req, err := DecodeArm(r.Body)
	if err != nil {
		return 0, nil, err
	}
	id, err := s.callerIdentity(p)
	if err != nil {
		return 0, nil, err
	}
	if sess, err := s.trackedSessionOf(id); err != nil {
		return 0, nil, err
	} else if sess != "" {
		return 0, nil, conflict("caller %s is tracked%s: a tracked process can't be armed (what it forks is its own root's)", id, s.inSession(sess, p))
	}
	se, created, err := s.sessionForRoot(api.AddRoot{Session: req.Session, Kind: req.Kind, Label: req.Label}, p)
	if err != nil {
		return 0, nil, err
	}
	cookie := s.arms.cookie(se)
	if err := s.tracker.Arm(id, cookie); err != nil {
		if created {
			s.dropIfEmpty(se)
			s.forgetCookie(se)
		}
		return 0, nil, armError(err)
	}
	if err := s.watchArmed(id, se); err != nil {
		_ = s.tracker.Disarm(id)
		return 0, nil, err
	}
	if created {
		s.save()
	}
	return http.StatusCreated, api.Armed{Process: id, Session: se.id, Cookie: cookie}, nil
}

func armError(err error) error {
	switch {
	case errors.Is(err, tracker.ErrCantArm):
		return errorf(http.StatusServiceUnavailable, api.CodeBadBackend, "%v", err)
	case errors.Is(err, loader.ErrArmsFull):
		return conflict("%v", err)
	}
	return err
}

// disarm answers DELETE /v1/arms: it disarms the caller.
func (s *Server) disarm(r *http.Request, p Peer) (int, any, error) {
	id, err := s.callerIdentity(p)
	if err != nil {
		return 0, nil, err
	}
	se := s.unwatchArmed(id)
	if se == nil {
		return 0, nil, notFound("caller %s is not armed", id)
	}
	if err := s.tracker.Disarm(id); err != nil {
		return 0, nil, err
	}
	return http.StatusOK, api.Armed{Process: id, Session: se.id, Cookie: s.arms.cookieOfSession(se)}, nil
}

// watchArmed records that id is armed for se, and, the first time, starts
// watching it: when it exits, its arm goes. The watch is a pidfd whose
// start time is checked after opening.
func (s *Server) watchArmed(id lineage.Identity, se *session) error {
	s.arms.mu.Lock()
	if a, ok := s.arms.procs[id]; ok {
		a.session = se
		s.arms.mu.Unlock()
		return nil
	}
	s.arms.mu.Unlock()
	if err := s.usage.take(se.uid, limitOwnerWatches, 1); err != nil {
		return err
	}
	fail := func(err error) error {
		s.usage.give(se.uid, limitOwnerWatches, 1)
		return fmt.Errorf("arm %s: %w", id, err)
	}
	fd, err := unix.PidfdOpen(int(id.PID), unix.PIDFD_NONBLOCK)
	if err != nil {
		return fail(err)
	}
	if err := s.proc.Check(id); err != nil {
		unix.Close(fd)
		return fail(err)
	}
	f := os.NewFile(uintptr(fd), "pidfd")
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return fail(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.arms.mu.Lock()
	s.arms.procs[id] = &armedProc{session: se, stop: func() { cancel(); f.Close() }, uid: se.uid}
	s.arms.mu.Unlock()
	go func() {
		first := true
		// A pidfd turns readable when its process exits.
		err := raw.Read(func(uintptr) bool {
			if first {
				first = false
				return false
			}
			return true
		})
		if err != nil || ctx.Err() != nil {
			return
		}
		if s.unwatchArmed(id) != nil {
			_ = s.tracker.Disarm(id)
		}
	}()
	return nil
}

// unwatchArmed forgets id's arm and stops its watch; it returns the
// session it was armed for, nil when it was not armed.
func (s *Server) unwatchArmed(id lineage.Identity) *session {
	s.arms.mu.Lock()
	a, ok := s.arms.procs[id]
	delete(s.arms.procs, id)
	s.arms.mu.Unlock()
	if !ok {
		return nil
	}
	a.stop()
	s.usage.give(a.uid, limitOwnerWatches, 1)
	return a.session
}

// disarmSession disarms every process armed for se, which is closing: no
// new root can be forked under its cookie after this.
func (s *Server) disarmSession(se *session) {
	var ids []lineage.Identity
	s.arms.mu.Lock()
	for id, a := range s.arms.procs {
		if a.session == se {
			ids = append(ids, id)
		}
	}
	s.arms.mu.Unlock()
	for _, id := range ids {
		if s.unwatchArmed(id) != nil {
			if err := s.tracker.Disarm(id); err != nil {
				s.note("lineage: session %s: disarm %s: %v\n", se.id, id, err)
			}
		}
	}
}

// forgetCookie drops se's cookie once se is gone.
func (s *Server) forgetCookie(se *session) {
	s.arms.mu.Lock()
	defer s.arms.mu.Unlock()
	if c, ok := s.arms.cookieOf[se]; ok {
		delete(s.arms.cookies, c)
		delete(s.arms.cookieOf, se)
	}
}

// claimArmed makes the roots forked under se's cookie that se doesn't
// have yet its roots, from the kernel's roots map, and waits for the
// tracker's pending events, so that what is reported of them (argv at
// their last exec) is what they run now: a test's processes are asked
// about milliseconds after they started. Call with se.op held.
func (s *Server) claimArmed(se *session) {
	cookie := s.arms.cookieOfSession(se)
	if cookie == 0 {
		return
	}
	armed, err := s.tracker.ArmedRoots()
	if err != nil {
		s.note("lineage: session %s: list the armed roots: %v\n", se.id, err)
		return
	}
	// A root another session has (it registered itself there: see
	// rebindArmed) is not claimed back.
	taken := map[lineage.Identity]bool{}
	s.reg.mu.Lock()
	for _, other := range s.reg.sessions {
		for id := range other.roots {
			taken[id] = true
		}
	}
	s.reg.mu.Unlock()
	synced := false
	for id, c := range armed {
		if c != cookie || taken[id] {
			continue
		}
		if !synced {
			// Only for a session with armed roots: a test that forked
			// nothing costs no wait.
			defer s.syncEvents()
			synced = true
		}
		s.reg.mu.Lock()
		_, have := se.roots[id]
		s.reg.mu.Unlock()
		if have {
			continue
		}
		j, err := s.tracker.Resume(id, tracker.RegisterOptions{})
		if err != nil {
			s.note("lineage: session %s: armed root %s: %v\n", se.id, id, err)
			continue
		}
		rt := &root{job: j, added: time.Now(), command: j.Report().Command}
		s.reg.mu.Lock()
		se.roots[id] = rt
		s.touch(se)
		s.reg.mu.Unlock()
		s.reg.rootSession.Store(id, se.id)
	}
}

// syncEvents waits, boundedly, for the tracker's pending events.
func (s *Server) syncEvents() {
	ctx, cancel := context.WithTimeout(context.Background(), syncBeforeEnd)
	defer cancel()
	_ = s.tracker.Sync(ctx)
}

// armedFork indexes an armed root's events under its session as they
// come (the tracker's event goroutine), so that the session's streams have
// them from its first fork; the root becomes the session's at the next
// claim.
func (s *Server) armedFork(ev lineage.Event) {
	if !s.arms.ready.Load() {
		return // an earlier daemon's arm: no session of this one's
	}
	armed, err := s.tracker.ArmedRoots()
	if err != nil {
		return
	}
	if se := s.arms.sessionOf(armed[ev.Process]); se != nil {
		s.reg.rootSession.Store(ev.Process, se.id)
	}
}

// rebindArmed makes id, a root an armed process forked that now registers
// itself (lineage exec, a client's run, inside a test the pytest plugin
// armed for), a root of se, the session it asks for, rather than of the
// armed session: it is already a root in the kernel, from its first
// instruction, so only the session it belongs to changes. It refuses when
// id isn't an armed root, and when the armed session is another uid's.
func (s *Server) rebindArmed(se *session, id lineage.Identity, label string, command []string, p Peer) (api.Root, error) {
	armed, err := s.tracker.ArmedRoots()
	if err != nil {
		return api.Root{}, err
	}
	cookie, ok := armed[id]
	if !ok {
		return api.Root{}, fmt.Errorf("register %s: %w", id, loader.ErrAlreadyTracked)
	}
	var j *tracker.Job
	from := s.arms.sessionOf(cookie)
	if from != nil {
		if !from.visible(p) {
			// Another uid's session is not named.
			return api.Root{}, forbidden("process %s is a root of a session caller uid %d may not use: it may not move it", id, p.UID)
		}
		s.reg.mu.Lock()
		if rt, had := from.roots[id]; had {
			j = rt.job
		}
		s.reg.mu.Unlock()
	}
	if j == nil {
		if j, err = s.tracker.Resume(id, tracker.RegisterOptions{Command: command}); err != nil {
			return api.Root{}, fmt.Errorf("register %s: %w", id, err)
		}
	}
	// se's first, then no longer the armed session's: at no moment in
	// none, so the armed session's claim never takes it back.
	v, err := s.addClaimed(se, id, j, label, command)
	if err != nil {
		return api.Root{}, err
	}
	if from != nil && from != se {
		from.op.Lock()
		s.reg.mu.Lock()
		delete(from.roots, id)
		s.touch(from)
		s.reg.mu.Unlock()
		from.op.Unlock()
	}
	return v, nil
}

// addClaimed makes j, the job of id, a root of se.
func (s *Server) addClaimed(se *session, id lineage.Identity, j *tracker.Job, label string, command []string) (api.Root, error) {
	se.op.Lock()
	defer se.op.Unlock()
	rt := &root{job: j, label: label, added: time.Now(), command: command}
	if command == nil {
		rt.command = j.Report().Command
	}
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	if se.closing || se.closed {
		return api.Root{}, conflict("session %q is closing", se.id)
	}
	se.roots[id] = rt
	s.touch(se)
	s.reg.rootSession.Store(id, se.id)
	return rt.view(id, se.id), nil
}
