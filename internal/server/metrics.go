package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/lineage-dev/lineage/internal/buildinfo"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/lineage"
)

// metrics are the daemon's Prometheus series, in a registry of their own
// (with the Go and process collectors). Every series exists from startup;
// none has a pid or session label, since those are unbounded. Safe for
// concurrent use.
type metrics struct {
	reg         *prometheus.Registry
	events      [lineage.EventExit + 1]prometheus.Counter
	reaps       *prometheus.CounterVec
	reaped      *prometheus.CounterVec
	signals     *prometheus.CounterVec
	reapSeconds prometheus.Histogram
	refusals    [numLimits]prometheus.Counter
}

// reapSignals are the signals a reap sends, created at zero.
var reapSignals = []string{"STOP", "TERM", "CONT", "KILL"}

func newMetrics(s *Server) *metrics {
	m := &metrics{reg: prometheus.NewRegistry()}
	events := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lineage_events_total",
		Help: "Lineage events the daemon received from its tracker, by kind.",
	}, []string{"kind"})
	for _, k := range []lineage.EventKind{lineage.EventFork, lineage.EventExec, lineage.EventExit} {
		m.events[k] = events.WithLabelValues(k.String())
	}
	m.reaps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lineage_reaps_total",
		Help: "Decisions on a root's lineage (turn end, session close), by decision (reap, report, skip) and, for reaps, result (complete, incomplete: survivors or a timeout).",
	}, []string{"decision", "result"})
	for _, dr := range [][2]string{{"reap", "complete"}, {"reap", "incomplete"}, {"report", "none"}, {"skip", "none"}} {
		m.reaps.WithLabelValues(dr[0], dr[1])
	}
	m.reaped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lineage_reaped_processes_total",
		Help: "Processes a reap dealt with, by how each ended.",
	}, []string{"result"})
	for _, r := range []lineage.Result{lineage.Exited, lineage.Terminated, lineage.Killed, lineage.Kept, lineage.Vanished, lineage.Refused, lineage.Survived} {
		m.reaped.WithLabelValues(string(r))
	}
	m.signals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lineage_signals_total",
		Help: "Signals sent by reaps, by signal.",
	}, []string{"signal"})
	for _, sig := range reapSignals {
		m.signals.WithLabelValues(sig)
	}
	m.reapSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "lineage_reap_duration_seconds",
		Help:    "How long a reap took, linger and grace included.",
		Buckets: []float64{0.005, 0.01, 0.05, 0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 300},
	})
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "lineage_refused_total",
		Help: "Requests and connections refused (429 too_many) because a uid other than root was at a quota, by the quota (streams, sessions, keeps, owner_watches, connections, records), or because the daemon kept its last file descriptors for root and its own work (files).",
	}, []string{"reason"})
	for l := limit(0); l < numLimits; l++ {
		m.refusals[l] = refused.WithLabelValues(limitNames[l].reason)
	}
	b := buildinfo.Get()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "lineage_build_info",
		Help:        "Always 1; the labels say which lineage serves (as lineage version prints it).",
		ConstLabels: prometheus.Labels{"version": b.Version, "revision": b.Commit, "goversion": b.Go, "goarch": b.Arch, "bpf": b.BPF},
	})
	info.Set(1)
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		events, m.reaps, m.reaped, m.signals, m.reapSeconds, refused, info,
		&stateCollector{s: s},
	)
	return m
}

// event counts one tracker event; it is on the tracker's event path.
func (m *metrics) event(ev lineage.Event) {
	if int(ev.Kind) < len(m.events) && m.events[ev.Kind] != nil {
		m.events[ev.Kind].Inc()
	}
}

// refused counts one refusal past a quota.
func (m *metrics) refused(l limit) { m.refusals[l].Inc() }

// settled counts one decision on a root and, for a reap, what it did.
func (m *metrics) settled(rep *job.Report) {
	decision, _, _ := strings.Cut(rep.Decision, ":")
	if rep.Reap == nil {
		m.reaps.WithLabelValues(decision, "none").Inc()
		return
	}
	result := "complete"
	if len(rep.Reap.Survivors) > 0 || rep.ReapTimedOut {
		result = "incomplete"
	}
	m.reaps.WithLabelValues(decision, result).Inc()
	m.reapSeconds.Observe(rep.Reap.Took.Seconds())
	for _, o := range rep.Reap.Outcomes {
		m.reaped.WithLabelValues(string(o.Result)).Inc()
		for _, sig := range o.Sent {
			m.signals.WithLabelValues(sig).Inc()
		}
	}
}

// handler serves the registry in the Prometheus text format. It needs no
// authorisation: whoever reaches the socket (or the metrics address) may
// read it, and it names no process or session.
func (m *metrics) handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// ServeMetrics answers GET /metrics, and nothing else, on ln (a TCP
// listener, for Prometheus can't scrape a Unix socket) until Close; it
// returns nil then.
func (s *Server) ServeMetrics(ln net.Listener) error {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", s.metrics.handler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, IdleTimeout: time.Minute}
	if !s.metricsHTTP.add(srv) {
		ln.Close()
		return nil
	}
	err := srv.Serve(ln)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// metricsListeners are the HTTP servers answering /metrics on TCP
// listeners (ServeMetrics); closed is set once Close began, after which
// none is added. mu guards both, and is taken with no other lock held.
type metricsListeners struct {
	mu      sync.Mutex
	servers []*http.Server
	closed  bool
}

// add adds srv, unless the listeners are closed: it reports whether it did.
func (m *metricsListeners) add(srv *http.Server) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false
	}
	m.servers = append(m.servers, srv)
	return true
}

// shutdown closes the listeners and shuts their servers down; any added
// later is refused.
func (m *metricsListeners) shutdown(ctx context.Context) {
	m.mu.Lock()
	srvs := m.servers
	m.servers, m.closed = nil, true
	m.mu.Unlock()
	for _, srv := range srvs {
		_ = srv.Shutdown(ctx)
	}
}
