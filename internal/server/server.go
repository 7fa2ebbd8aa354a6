package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"sync"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/policy"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/tracker"
)

// Options configure a [Server].
type Options struct {
	// Tracker opens the host's one tracker; its OnEvent is the server's.
	Tracker tracker.TrackerOptions
	// StateDir holds the state file; "" keeps no state.
	StateDir string
	// Reaping is the kill switch, resolved (the environment wins).
	Reaping policy.Reaping
	// Linger and Grace are as in [job.ReapOptions].
	Linger, Grace time.Duration
	// Log receives notes for people; nil discards them.
	Log io.Writer
	// BodyTimeout bounds the time a client takes to send a request body
	// once its headers are in; zero means [DefaultBodyTimeout].
	BodyTimeout time.Duration
	// Record asks for one record per session.
	Record RecordOptions
	// Quotas bound what each uid other than root holds open at once; the
	// zero value limits nothing (see [DefaultQuotas]).
	Quotas Quotas
}

// Server holds the tracker, the sessions and their roots and keeps. Open
// it, Serve it on a listener, Close it last. Closing kills nothing.
type Server struct {
	opts    Options
	tracker *tracker.Tracker
	proc    proc.FS
	hub     *hub
	http    *http.Server
	log     io.Writer

	// mu guards sessions and their fields, never held across I/O.
	mu       sync.Mutex
	sessions map[string]*session
	nextID   int
	// dirty names the sessions changed (or gone) since the last save.
	dirty map[string]bool
	// usage counts what each uid holds open, against opts.Quotas.
	usage *usage
	// lock is the state directory's lock, held while the server is open.
	lock *os.File
	// rootSession maps a root to its session's id, for event filtering.
	rootSession sync.Map
	state       *stateFile
	closing     sync.Once
	closeErr    error
	// stopLoops ends the background loops: the save loop, the loss
	// watcher.
	stopLoops chan struct{}
	// bgMu orders the saves no request asked for (the save loop, keep
	// expiries), which run under its read lock, before the tracker's
	// close, which sets bgClosed under its lock first.
	bgMu     sync.RWMutex
	bgClosed bool
	// metrics are the /metrics series; metricsHTTP the TCP listeners
	// serving them (guarded by mu), metricsClosed set once Close began.
	metrics       *metrics
	metricsHTTP   []*http.Server
	metricsClosed bool
	// loops are the background loops, waited for before the tracker
	// closes.
	loops sync.WaitGroup
	// records, if set, writes each session's record (records.go).
	records *records
	// arms maps sessions to cookies and armed processes (arms.go).
	arms armsState
}

// Open opens the tracker (taking a pinned one over, when
// Options.Tracker.PinRoot has one) and restores the sessions saved in the
// state directory: roots the pinned tracker still has come back with their
// lineage as the kernel kept it, others that still run are registered
// again, and roots the pinned tracker has that no saved session names go to
// a recovered session. The calling process becomes a child subreaper, as
// for any tracker.
func Open(opts Options) (*Server, error) {
	if err := opts.Quotas.validate(); err != nil {
		return nil, fmt.Errorf("%w %w", lineage.ErrInvalid, err)
	}
	s := &Server{opts: opts, sessions: make(map[string]*session), dirty: make(map[string]bool), hub: newHub(), log: opts.Log}
	if s.log == nil {
		s.log = io.Discard
	}
	var err error
	if s.proc, err = proc.Open("/proc"); err != nil {
		return nil, err
	}
	if err := s.openStateDir(); err != nil {
		return nil, err
	}
	fail := func(err error) (*Server, error) {
		if s.lock != nil {
			s.lock.Close()
		}
		return nil, err
	}
	s.hub.sessionOf = func(id lineage.Identity) string {
		v, _ := s.rootSession.Load(id)
		sid, _ := v.(string)
		return sid
	}
	s.metrics = newMetrics(s)
	s.usage = newUsage(opts.Quotas, s.metrics.refused)
	topts := opts.Tracker
	topts.OnEvent = func(ev lineage.Event) {
		if ev.Armed {
			s.armedFork(ev)
		}
		s.metrics.event(ev)
		s.hub.event(ev)
	}
	if s.tracker, err = tracker.OpenTracker(topts); err != nil {
		return fail(err)
	}
	s.arms.ready.Store(true)
	if err := s.startRecords(); err != nil {
		s.tracker.Close()
		return fail(err)
	}
	if err := s.restore(); err != nil {
		s.hub.close()
		s.records.wait()
		s.tracker.Close()
		return fail(err)
	}
	s.adoptUnlisted()
	s.keepAllInKernel()
	// The arms a pinned tracker holds are an earlier daemon's, whose
	// cookies this one doesn't know.
	if err := s.tracker.ClearArms(); err != nil {
		s.note("lineage: clear the pinned tracker's arms: %v\n", err)
	}
	// The first save writes a snapshot (the state as restored) and starts
	// an empty journal: a restarted daemon starts from one snapshot.
	s.save()
	s.startLoops()
	s.http = &http.Server{
		Handler:           s.readBodies(s.routes()),
		ConnContext:       peerContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
	}
	return s, nil
}

// openStateDir checks and locks the state directory, if the server keeps
// a state: the lock first, so that a second daemon reads and writes
// nothing of the first's.
func (s *Server) openStateDir() error {
	dir := s.opts.StateDir
	if dir == "" {
		return nil
	}
	if err := privateDir(dir, "state dir"); err != nil {
		return err
	}
	var err error
	if s.lock, err = lockState(dir); err != nil {
		return err
	}
	if s.state, err = openState(dir); err != nil {
		s.lock.Close()
		return err
	}
	return nil
}

// startLoops starts the background loops: the loss watcher, and, when
// the members of an unpinned tracker must be saved, the save loop.
func (s *Server) startLoops() {
	s.stopLoops = make(chan struct{})
	lost, statsErr := s.tracker.Stats()
	s.loops.Add(1)
	go func() {
		defer s.loops.Done()
		s.watchLosses(s.stopLoops, lossEvery, lost, statsErr == nil)
	}()
	if s.state != nil && !s.pinned() {
		s.loops.Add(1)
		go func() {
			defer s.loops.Done()
			s.saveLoop(s.stopLoops)
		}()
	}
}

// Serve answers requests on ln until Close; it returns nil then. Each
// connection is accounted for as it is accepted (limitedListener).
func (s *Server) Serve(ln net.Listener) error {
	err := s.http.Serve(s.limit(ln))
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops serving, ends the event streams, stops watching owners,
// compacts the state into one snapshot and closes the tracker, which
// tracks on in the kernel when it is pinned. Roots are neither reaped nor
// forgotten: the state keeps them for the next start.
func (s *Server) Close() error {
	s.closing.Do(func() { s.closeErr = s.close() })
	return s.closeErr
}

func (s *Server) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.hub.close()
	s.records.wait()
	close(s.stopLoops)
	s.loops.Wait()
	s.bgMu.Lock()
	s.bgClosed = true
	s.bgMu.Unlock()
	_ = s.http.Shutdown(ctx)
	s.stopMetrics(ctx)
	s.mu.Lock()
	for _, se := range s.sessions {
		se.stopOwner()
	}
	s.mu.Unlock()
	if s.state != nil {
		if err := s.state.close(); err != nil {
			s.note("lineage: save state: %v\n", err)
		}
	}
	err := s.tracker.Close()
	if s.lock != nil {
		s.lock.Close()
	}
	return err
}

func (s *Server) note(format string, args ...any) { fmt.Fprintf(s.log, format, args...) }

// handler is an API handler: it answers with v and status, or fails.
type handler func(r *http.Request, p Peer) (status int, v any, err error)

// methods dispatches a path by method and answers unknown ones with 405.
type methods map[string]handler

func (m methods) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, ok := m[r.Method]
	if !ok {
		for method := range m {
			w.Header().Add("Allow", method)
		}
		writeError(w, errorf(http.StatusMethodNotAllowed, CodeMethod, "method %s not allowed on %s", r.Method, r.URL.Path))
		return
	}
	r = r.WithContext(context.WithValue(r.Context(), responseKey{}, w))
	p, err := peerOf(r)
	if err != nil {
		writeError(w, err)
		return
	}
	status, v, err := h(r, p)
	if err != nil {
		writeError(w, err)
		return
	}
	if v != nil {
		writeJSON(w, status, v)
	}
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/v1/sessions", methods{"GET": s.listSessions, "POST": s.openSession})
	mux.Handle("/v1/sessions/{id}", methods{"GET": s.getSession})
	mux.Handle("/v1/sessions/{id}/turn-end", methods{"POST": s.turnEnd})
	mux.Handle("/v1/sessions/{id}/close", methods{"POST": s.closeSessionHandler})
	mux.Handle("/v1/sessions/{id}/report", methods{"GET": s.reportSession})
	mux.Handle("/v1/roots", methods{"GET": s.listRoots, "POST": s.addRoot})
	mux.Handle("/v1/roots/{id}", methods{"GET": s.getRoot, "DELETE": s.removeRoot})
	mux.Handle("/v1/roots/{id}/end", methods{"POST": s.endRoot})
	mux.Handle("/v1/roots/{id}/holders", methods{"GET": s.holders})
	mux.Handle("/v1/keeps", methods{"POST": s.addKeep})
	mux.Handle("/v1/keeps/{rule}", methods{"DELETE": s.removeKeep})
	mux.Handle("/v1/events", methods{"GET": s.events})
	mux.Handle("/v1/arms", methods{"POST": s.arm, "DELETE": s.disarm})
	mux.Handle("/v1/status", methods{"GET": s.status})
	mux.Handle("/metrics", getOnly(s.metrics.handler()))
	mux.Handle("/v1/why/{process}", methods{"GET": s.why})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, notFound("no endpoint %s", r.URL.Path))
	})
	return mux
}

// getOnly answers a method other than GET (or HEAD) as every endpoint
// does: 405, its Allow header, a JSON error.
func getOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Add("Allow", http.MethodGet)
			writeError(w, errorf(http.StatusMethodNotAllowed, CodeMethod, "method %s not allowed on %s", r.Method, r.URL.Path))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// status answers without a look at the sessions: its cost doesn't grow
// with them (the counts are the quotas').
func (s *Server) status(r *http.Request, p Peer) (int, any, error) {
	n := s.usage.count(p.UID, limitSessions, p.Root())
	b := s.tracker.Backend()
	return http.StatusOK, Status{
		API: APIVersion, Reaping: s.opts.Reaping.String(), Sessions: n, UID: p.UID, Goroutines: runtime.NumGoroutine(),
		Backend: b.Backend, BackendReason: b.Reason,
	}, nil
}

// parseIdentityPath reads the {id} of a roots path.
func parseIdentityPath(r *http.Request) (lineage.Identity, error) {
	return lineage.ParseIdentity(r.PathValue("id"))
}
