package server

import (
	"net/http"
	"sync"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// item writes one or more events of the record schema.
type item struct {
	// root is the lineage the item is about; zero for every stream.
	root lineage.Identity
	// session, when set, names the session instead of root.
	session string
	// everyStream sends the item to every stream, whatever its session.
	everyStream bool
	write       func(*record.Writer) error
}

// subscriber is one event stream. Items that don't fit its buffer are
// counted and written as a loss event: a slow reader never blocks the
// tracker.
type subscriber struct {
	ch      chan item
	session string
	lost    uint64
	// follows is the session a filtered stream follows (events_streamend.go);
	// ended is closed, once, when that session has closed.
	follows *session
	ended   chan struct{}
}

// hub fans events out to the streams. It is safe for concurrent use.
type hub struct {
	mu     sync.Mutex
	subs   map[*subscriber]bool
	closed bool
	// sessionOf maps a root to its session, for filtering.
	sessionOf func(lineage.Identity) string
}

func newHub() *hub { return &hub{subs: make(map[*subscriber]bool)} }

// event is the tracker's OnEvent.
func (h *hub) event(ev lineage.Event) {
	h.publish(item{root: ev.Root, write: func(w *record.Writer) error { return w.Event(ev) }})
}

// settled publishes a job's decision as a standalone record has it: a
// leak event for each member but the root that was alive when it was
// decided (those reported, or those the reap found), then the reap's
// signal and keep events.
func (h *hub) settled(session string, rep *job.Report, why string) {
	h.publish(item{session: session, write: func(w *record.Writer) error {
		for _, m := range leftBehind(rep) {
			if err := w.Leak(m, why); err != nil {
				return err
			}
		}
		if rep.Reap != nil {
			return w.Reap(*rep.Reap, why)
		}
		return nil
	}})
}

// leftBehind are the members of rep's lineage, but its root, alive when
// it was decided on: a standalone record's leaks (what the root left
// behind), whether they were then reaped or only reported.
func leftBehind(rep *job.Report) []lineage.Member {
	var out []lineage.Member
	for _, l := range rep.Leftovers {
		if l.Identity != rep.Root {
			out = append(out, l.Member)
		}
	}
	if rep.Reap != nil {
		for _, o := range rep.Reap.Outcomes {
			if o.Member.Identity != rep.Root {
				out = append(out, o.Member)
			}
		}
	}
	return out
}

// kept publishes a keep request.
func (h *hub) kept(session string, m lineage.Member, reason string) {
	h.publish(item{session: session, write: func(w *record.Writer) error { return w.Keep(m, reason) }})
}

func (h *hub) unkept(session string, m lineage.Member, reason string) {
	h.publish(item{session: session, write: func(w *record.Writer) error { return w.Unkeep(m, reason) }})
}

func (h *hub) publish(it item) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) == 0 {
		return
	}
	if it.session == "" && h.sessionOf != nil && !it.root.IsZero() {
		it.session = h.sessionOf(it.root)
	}
	for sub := range h.subs {
		if !it.everyStream && sub.session != "" && sub.session != it.session {
			continue
		}
		select {
		case sub.ch <- it:
		default:
			sub.lost++
		}
	}
}

func (h *hub) subscribe(session string) *subscriber { return h.subscribeSize(session, 1024) }

// subscribeSize is subscribe with room for size items.
func (h *hub) subscribeSize(session string, size int) *subscriber {
	h.mu.Lock()
	defer h.mu.Unlock()
	sub := &subscriber{ch: make(chan item, size), session: session, ended: make(chan struct{})}
	if h.closed {
		close(sub.ch)
		return sub
	}
	h.subs[sub] = true
	return sub
}

func (h *hub) unsubscribe(sub *subscriber) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.subs[sub] {
		delete(h.subs, sub)
		close(sub.ch)
	}
}

// takeLost returns and clears sub's count of dropped items.
func (h *hub) takeLost(sub *subscriber) uint64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := sub.lost
	sub.lost = 0
	return n
}

// close ends every stream.
func (h *hub) close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.closed = true
	for sub := range h.subs {
		delete(h.subs, sub)
		close(sub.ch)
	}
}

// flushWriter flushes the response after every write, so each event line
// reaches the client as it happens; each write must be read within
// writeTimeout.
type flushWriter struct {
	w  http.ResponseWriter
	rc *http.ResponseController
}

func (fw flushWriter) Write(b []byte) (int, error) {
	_ = fw.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	n, err := fw.w.Write(b)
	if ferr := fw.rc.Flush(); err == nil {
		err = ferr
	}
	return n, err
}

// events streams NDJSON in the record schema: a header line, then events
// as they happen, until the client goes away or the server closes; a
// stream filtered to a session ends, with an end event, when the session
// has closed.
func (s *Server) events(r *http.Request, p Peer) (int, any, error) {
	want := r.URL.Query().Get("session")
	var follows *session
	if want != "" {
		s.reg.mu.Lock()
		se, err := s.lookup(want, p)
		s.reg.mu.Unlock()
		if err != nil {
			return 0, nil, err
		}
		follows = se
	} else if !p.Root() {
		return 0, nil, forbidden("caller uid %d may stream only its own sessions: give ?session=", p.UID)
	}
	w := r.Context().Value(responseKey{}).(http.ResponseWriter)
	if _, ok := w.(http.Flusher); !ok {
		return 0, nil, errorf(http.StatusInternalServerError, api.CodeInternal, "streaming unsupported")
	}
	if err := s.usage.take(p.UID, limitStreams, 1); err != nil {
		return 0, nil, err
	}
	defer s.usage.give(p.UID, limitStreams, 1)
	sub := s.hub.subscribe(want)
	defer s.hub.unsubscribe(sub)
	if follows != nil {
		s.follow(sub, follows)
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	rw, err := record.NewWriter(flushWriter{w, http.NewResponseController(w)}, record.HostHeader(nil), nil)
	if err != nil {
		return 0, nil, nil
	}
	for {
		select {
		case <-r.Context().Done():
			return 0, nil, nil
		case it, ok := <-sub.ch:
			if !ok {
				return 0, nil, nil
			}
			if !s.writeItem(rw, sub, it) {
				return 0, nil, nil
			}
		case <-sub.ended:
			s.endStream(rw, sub)
			return 0, nil, nil
		}
	}
}

// writeItem writes it to a stream, after a loss event for what the
// stream dropped before it; false once the stream is broken.
func (s *Server) writeItem(rw *record.Writer, sub *subscriber, it item) bool {
	if n := s.hub.takeLost(sub); n > 0 {
		_ = rw.Loss(n)
	}
	return it.write(rw) == nil
}

type responseKey struct{}

// eventsAfterForget is how long a forgotten root's late events (the exits
// its reap caused, still in the ring buffer) still reach its session's
// streams.
const eventsAfterForget = 10 * time.Second

// unindex stops sending root's events to its session's streams, once its
// late events are through.
func (s *Server) unindex(root lineage.Identity) {
	time.AfterFunc(eventsAfterForget, func() { s.reg.rootSession.Delete(root) })
}
