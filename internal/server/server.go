package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/server/store"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
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
//
// Its fields are its parts, each guarded by its own lock, taken in this
// order and never the reverse: the lifecycle's background lock (read),
// the store's save lock, the registry's mu, the quotas' lock. doc.go lists
// which files own which part.
type Server struct {
	// opts, log and proc are set by Open and never change.
	opts Options
	log  io.Writer
	proc proc.FS
	// tracker is the host's one tracker, open from Open to Close; its
	// events go to the arms, the metrics and the hub, in that order.
	tracker *tracker.Tracker
	// reg is the sessions: by id, the next number, those changed since
	// the last save, and each root's session (sessions_registry.go).
	reg registry
	// usage counts what each uid holds open, against opts.Quotas; its own
	// lock (http_quota.go).
	usage *usage
	// lock and state are the store, nil when the server keeps no state:
	// the state directory's lock, held from Open to the end of Close, and
	// its snapshot and journal (package store; store.go is the server's
	// side).
	lock  *store.DirLock
	state *store.Store
	// hub fans the tracker's events out to the event streams (events.go);
	// records, if set, writes each session's record from it
	// (events_records.go).
	hub     *hub
	records *records
	// arms maps sessions to cookies and armed processes; its own lock
	// (sessions_arms.go).
	arms armsState
	// metrics are the /metrics series; metricsHTTP the TCP listeners
	// serving them (metrics.go, metrics_state.go).
	metrics     *metrics
	metricsHTTP metricsListeners
	// http serves the API on the socket: routes here, the caller and its
	// rights in http_peer.go and http_authz.go, bodies in http_body.go and
	// http_decode.go.
	http *http.Server
	// life is the background loops and the one close (server_lifecycle.go).
	life lifecycle
}

// Open opens the tracker (taking a pinned one over, when
// Options.Tracker.PinRoot has one) and restores the sessions saved in the
// state directory: roots the pinned tracker still has come back with their
// lineage as the kernel kept it, others that still run are registered
// again, and roots the pinned tracker has that no saved session names go to
// a recovered session. The calling process becomes a child subreaper, as
// for any tracker.
//
// Open runs its steps in order; a step that fails undoes those before it,
// last first, and Open returns its error.
func Open(opts Options) (*Server, error) {
	s, err := newServer(opts)
	if err != nil {
		return nil, err
	}
	var undo unwind
	for _, step := range []func(*unwind) error{s.openStore, s.openTracker, s.startRecords, s.restoreState} {
		if err := step(&undo); err != nil {
			undo.run()
			return nil, err
		}
	}
	s.takeOver()
	// The first save writes a snapshot (the state as restored) and starts
	// an empty journal: a restarted daemon starts from one snapshot.
	s.save()
	s.startLoops()
	s.http = s.newHTTP()
	return s, nil
}

// unwind is what Open undoes when a later step fails: each step that
// succeeds adds what undoes it, and run undoes them, last first.
type unwind []func()

func (u *unwind) add(f func()) { *u = append(*u, f) }

func (u unwind) run() {
	for i := len(u) - 1; i >= 0; i-- {
		u[i]()
	}
}

// newServer checks opts and makes the server's parts, opening nothing but
// /proc.
func newServer(opts Options) (*Server, error) {
	if err := opts.Quotas.validate(); err != nil {
		return nil, fmt.Errorf("%w %w", lineage.ErrInvalid, err)
	}
	s := &Server{opts: opts, reg: newRegistry(), hub: newHub(), log: opts.Log, life: newLifecycle()}
	if s.log == nil {
		s.log = io.Discard
	}
	var err error
	if s.proc, err = proc.Open("/proc"); err != nil {
		return nil, err
	}
	s.hub.sessionOf = s.reg.sessionOf
	s.metrics = newMetrics(s)
	s.usage = newUsage(opts.Quotas, s.metrics.refused)
	return s, nil
}

// openStore locks and opens the state directory, if the server keeps a
// state: the lock first, so that a second daemon reads and writes nothing
// of the first's. Undone, the lock is released.
func (s *Server) openStore(undo *unwind) error {
	dir := s.opts.StateDir
	if dir == "" {
		return nil
	}
	var err error
	if s.lock, err = store.LockDir(dir); err != nil {
		return err
	}
	undo.add(s.lock.Release)
	s.state, err = store.Open(dir)
	return err
}

// openTracker opens the tracker, its events going to the arms, the
// metrics and the hub, and readies the arms. Undone, the tracker closes.
func (s *Server) openTracker(undo *unwind) error {
	topts := s.opts.Tracker
	topts.OnEvent = func(ev lineage.Event) {
		if ev.Armed {
			s.armedFork(ev)
		}
		s.metrics.event(ev)
		s.hub.event(ev)
	}
	var err error
	if s.tracker, err = tracker.OpenTracker(topts); err != nil {
		return err
	}
	undo.add(func() { s.tracker.Close() })
	s.arms.ready.Store(true)
	return nil
}

// startRecords starts the session records' writer, if Options.Record
// asks for one (events_records.go). Undone, the hub closes, which ends the
// writer, and the writer is waited for.
func (s *Server) startRecords(undo *unwind) error {
	if err := s.openRecords(); err != nil {
		return err
	}
	undo.add(func() {
		s.hub.close()
		s.records.wait()
	})
	return nil
}

// restoreState restores the sessions the store reads back (store.go's
// restore). Its last step, it adds nothing to undo.
func (s *Server) restoreState(*unwind) error { return s.restore() }

// takeOver makes what a pinned tracker holds this server's: roots no
// restored session names go to a recovered session, every session's keeps
// are the kernel's again, and the arms of an earlier daemon, whose cookies
// this one doesn't know, are cleared.
func (s *Server) takeOver() {
	s.adoptUnlisted()
	s.keepAllInKernel()
	if err := s.tracker.ClearArms(); err != nil {
		s.note("lineage: clear the pinned tracker's arms: %v\n", err)
	}
}

// startLoops starts the background loops: the loss watcher, and, when
// the members of an unpinned tracker must be saved, the save loop.
func (s *Server) startLoops() {
	lost, statsErr := s.tracker.Stats()
	s.life.goLoop(func(stop <-chan struct{}) {
		s.watchLosses(stop, lossEvery, lost, statsErr == nil)
	})
	if s.state != nil && !s.pinned() {
		s.life.goLoop(s.saveLoop)
	}
}

// newHTTP is the API's HTTP server: its routes, each request's body read
// under a deadline, the peer's credentials in each connection's context.
func (s *Server) newHTTP() *http.Server {
	return &http.Server{
		Handler:           s.readBodies(s.routes()),
		ConnContext:       peerContext,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       time.Minute,
		// The API's requests carry a few short headers: a client can't
		// make the daemon hold a megabyte for each of its connections.
		MaxHeaderBytes: maxHeaderBytes,
	}
}

// maxHeaderBytes bounds a request's header (net/http adds 4 KiB of slack).
const maxHeaderBytes = 16 << 10

// writeTimeout is how long a client may take to read what the daemon
// writes it, an answer or one event of a stream; past it the connection is
// cut. The wait for a long answer (a reap) is not counted: it runs before.
var writeTimeout = 30 * time.Second

// writeWithin bounds the write that follows by writeTimeout, so that a
// client that stops reading can't hold a handler, and its memory, for good.
func writeWithin(w http.ResponseWriter) {
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout))
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
	return s.life.closeOnce(s.close)
}

// close ends the parts in order: the streams and records, the loops, the
// background work, the API and metrics listeners, the owners' watches, the
// store (compacted), the tracker, and last the state directory's lock.
func (s *Server) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s.hub.close()
	s.records.wait()
	s.life.stopLoops()
	s.life.endBackground()
	_ = s.http.Shutdown(ctx)
	s.metricsHTTP.shutdown(ctx)
	s.reg.mu.Lock()
	for _, se := range s.reg.sessions {
		se.stopOwner()
	}
	s.reg.mu.Unlock()
	if s.state != nil {
		if err := s.state.Close(); err != nil {
			s.note("lineage: save state: %v\n", err)
		}
	}
	err := s.tracker.Close()
	s.lock.Release()
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
		writeError(w, errorf(http.StatusMethodNotAllowed, api.CodeMethod, "method %s not allowed on %s", r.Method, r.URL.Path))
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
		writeJSONIndent(w, status, v, wantsIndent(r))
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
			writeError(w, errorf(http.StatusMethodNotAllowed, api.CodeMethod, "method %s not allowed on %s", r.Method, r.URL.Path))
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
	return http.StatusOK, api.Status{
		API: api.APIVersion, Reaping: s.opts.Reaping.String(), Sessions: n, UID: p.UID, Goroutines: runtime.NumGoroutine(),
		Backend: b.Backend, BackendReason: b.Reason, Features: []string{api.FeatureOrphanage},
	}, nil
}

// parseIdentityPath reads the {id} of a roots path.
func parseIdentityPath(r *http.Request) (lineage.Identity, error) {
	return lineage.ParseIdentity(r.PathValue("id"))
}
