package e2e

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// families is one scrape, parsed as Prometheus text.
type families map[string]*dto.MetricFamily

// scrape reads /metrics through the daemon's socket, or over TCP from
// addr when it is not "".
func scrape(t *testing.T, d *daemon, addr string) families {
	t.Helper()
	tr := &http.Transport{}
	url := "http://" + addr + "/metrics"
	if addr == "" {
		tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", d.sock)
		}
		url = "http://lineage/metrics"
	}
	c := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	defer tr.CloseIdleConnections()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("GET %s: %s, %s", url, resp.Status, resp.Header.Get("Content-Type"))
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("/metrics is not Prometheus text: %v", err)
	}
	return fams
}

// value is the series name{labels}: a counter's or gauge's value, a
// histogram's count. A missing series fails the test.
func (f families) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	fam, ok := f[name]
	if !ok {
		t.Fatalf("no series %s", name)
	}
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, m := range fam.GetMetric() {
		match := 0
		for _, lp := range m.GetLabel() {
			if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
				match++
			}
		}
		if match != len(want) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	t.Fatalf("no series %s%v", name, want)
	return 0
}

// freeAddr returns a loopback address with a port free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// allowedLabels are the only label names a lineage_* series may have: no
// pid, no session, nothing unbounded.
var allowedLabels = map[string]bool{"kind": true, "decision": true, "result": true, "signal": true,
	"version": true, "revision": true, "goversion": true, "goarch": true, "bpf": true, "reason": true, "from": true}

func checkStartup(t *testing.T, m families) {
	t.Helper()
	for _, name := range []string{"lineage_events_lost_total", "lineage_untracked_processes_total", "lineage_kernel_kills_spared_total",
		"lineage_sessions", "lineage_roots", "lineage_tracked_processes", "lineage_reap_duration_seconds",
		"lineage_forks_caught_total", "lineage_unattributed_orphans_total"} {
		if v := m.value(t, name); v != 0 {
			t.Errorf("%s = %v at startup, want 0", name, v)
		}
	}
	for _, from := range []string{"parent", "orphanage"} {
		if v := m.value(t, "lineage_adopted_processes_total", "from", from); v != 0 {
			t.Errorf("adopted{%s} = %v at startup, want 0", from, v)
		}
	}
	// The kernel's skipped runs count every process's forks, not only
	// members': they need not be 0, but they are there.
	for _, name := range []string{"lineage_hook_misses_total", "lineage_fork_hook_misses_total"} {
		m.value(t, name)
	}
	for _, k := range []string{"fork", "exec", "exit"} {
		m.value(t, "lineage_events_total", "kind", k)
	}
	for _, sig := range []string{"TERM", "KILL"} {
		if v := m.value(t, "lineage_signals_total", "signal", sig); v != 0 {
			t.Errorf("signals{%s} = %v at startup", sig, v)
		}
	}
	if v := m.value(t, "lineage_reaps_total", "decision", "reap", "result", "complete"); v != 0 {
		t.Errorf("reaps = %v at startup", v)
	}
	if v := m.value(t, "lineage_members_map_capacity"); v != 16 {
		t.Errorf("map capacity %v, want --max-members 16", v)
	}
	b := binaryBuild(t)
	if v := m.value(t, "lineage_build_info", "version", b.Version, "bpf", b.BPF, "goversion", b.Go, "goarch", b.Arch); v != 1 {
		t.Errorf("build info %v", v)
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		m.value(t, name)
	}
	for name, fam := range m {
		if !strings.HasPrefix(name, "lineage_") {
			continue
		}
		if fam.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total") {
			t.Errorf("counter %s lacks _total", name)
		}
		for _, s := range fam.GetMetric() {
			for _, l := range s.GetLabel() {
				if !allowedLabels[l.GetName()] {
					t.Errorf("%s has label %s", name, l.GetName())
				}
			}
		}
	}
}

func TestServeMetrics(t *testing.T) {
	addr := freeAddr(t)
	d := startDaemon(t, "", "--max-members", "16", "--ring-bytes", "4096", "--metrics-listen", addr)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	checkStartup(t, scrape(t, d, ""))
	checkStartup(t, scrape(t, d, addr))

	// A leak: a session, a root, a tracked sleeper, fork and exec events.
	d.execRoot("m", "autonomous", fmt.Sprintf("setsid sleep %s & sleep 0.2", testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 1)
	m := scrape(t, d, "")
	for name, want := range map[string]float64{"lineage_sessions": 1, "lineage_roots": 1} {
		if v := m.value(t, name); v != want {
			t.Errorf("%s = %v, want %v", name, v, want)
		}
	}
	if v := m.value(t, "lineage_tracked_processes"); v < 1 {
		t.Errorf("tracked processes %v with a sleeper tracked", v)
	}
	if v := m.value(t, "lineage_members_map_entries"); v < 1 {
		t.Errorf("map entries %v with a sleeper tracked", v)
	}
	for _, k := range []string{"fork", "exec"} {
		if v := m.value(t, "lineage_events_total", "kind", k); v < 2 {
			t.Errorf("events{%s} = %v after exec, sh and sleep", k, v)
		}
	}

	// The turn end reaps it with SIGTERM.
	var end api.Ended
	d.do("POST", "/v1/sessions/m/turn-end", nil, &end)
	allGone(t, left)
	m = scrape(t, d, "")
	if v := m.value(t, "lineage_reaps_total", "decision", "reap", "result", "complete"); v != 1 {
		t.Errorf("reaps{reap,complete} = %v, want 1 (%+v)", v, end)
	}
	if v := m.value(t, "lineage_reap_duration_seconds"); v != 1 {
		t.Errorf("reap durations observed %v, want 1", v)
	}
	if v := m.value(t, "lineage_signals_total", "signal", "TERM"); v < 1 {
		t.Errorf("signals{TERM} = %v after a reap", v)
	}
	if v := m.value(t, "lineage_reaped_processes_total", "result", "terminated"); v < 1 {
		t.Errorf("reaped{terminated} = %v after a reap", v)
	}
	if v := m.value(t, "lineage_roots"); v != 0 {
		t.Errorf("roots %v once the reaped root is forgotten", v)
	}
	if v := m.value(t, "lineage_tracked_processes"); v != 0 {
		t.Errorf("tracked processes %v once the lineage is reaped and forgotten", v)
	}
	// The exits reach the daemon through the ring buffer, after the reap
	// saw the deaths: give the reader a moment.
	exits := m.value(t, "lineage_events_total", "kind", "exit")
	for deadline := time.Now().Add(30 * time.Second); exits < 2 && time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		exits = scrape(t, d, "").value(t, "lineage_events_total", "kind", "exit")
	}
	if exits < 2 {
		t.Errorf("events{exit} = %v after sh exited and the sleeper was reaped", exits)
	}
	stormUntilLoss(t, d, mark)
	d.do("POST", "/v1/sessions/m/close", nil, &end)
	if v := scrape(t, d, addr).value(t, "lineage_sessions"); v != 0 {
		t.Errorf("sessions %v after close", v)
	}
}

// stormUntilLoss forks a storm wider than the 16-entry map, until the map
// has refused a process, then a storm of tracked processes while the
// daemon is stopped, so that its reader drains none of the one-page ring
// buffer and the kernel drops events: on a machine whose forks are slow, a
// running reader keeps up with any storm of 16 members. Each storm is
// finite and reaped; the daemon is the test's own child, continued before
// this returns.
func stormUntilLoss(t *testing.T, d *daemon, mark string) {
	t.Helper()
	script := fmt.Sprintf("for i in $(seq 64); do /bin/true & done; for i in $(seq 24); do sleep %s & done; wait", "0."+mark)
	untracked := 0.0
	for round := 0; round < 20 && untracked == 0; round++ {
		d.execRoot("m", "autonomous", script)
		untracked = scrape(t, d, "").value(t, "lineage_untracked_processes_total")
	}
	if untracked == 0 {
		t.Error("20 storms of 88 processes: none untracked by a 16-entry map")
	}

	dir := t.TempDir()
	started, storm, stormed := filepath.Join(dir, "started"), filepath.Join(dir, "storm"), filepath.Join(dir, "stormed")
	d.startExec("m", "autonomous", "sh", "-c", fmt.Sprintf(
		"touch %[1]s; i=0; while [ ! -e %[2]s ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; "+
			"for i in $(seq 200); do /bin/true; done; touch %[3]s", started, storm, stormed))
	waitFile(t, started)
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("stop the daemon: %v", err)
	}
	// Nothing fails the test while the daemon is stopped: it is continued
	// first, whatever happens.
	err := os.WriteFile(storm, nil, 0o644)
	for deadline := time.Now().Add(30 * time.Second); err == nil; time.Sleep(20 * time.Millisecond) {
		if _, serr := os.Stat(stormed); serr == nil {
			break
		}
		if time.Now().After(deadline) {
			err = fmt.Errorf("the storm did not end within 30 s")
		}
	}
	if err := d.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatalf("continue the daemon: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if lost := scrape(t, d, "").value(t, "lineage_events_lost_total"); lost == 0 {
		t.Error("200 tracked forks, execs and exits with the ring's reader stopped: no event lost")
	}
}

// With the proc backend, tracked processes are counted per root, and there
// is no membership map to show.
func TestServeMetricsProc(t *testing.T) {
	d := startDaemon(t, "", "--backend", "proc")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	if _, ok := scrape(t, d, "")["lineage_members_map_capacity"]; ok {
		t.Error("proc backend: a membership map capacity")
	}
	// The root lives on, so that the sleeper stays its child until a scan
	// of /proc has seen it (a busy machine may make the scans slow).
	d.startExec("p", "autonomous", "sh", "-c", fmt.Sprintf("sleep %s & wait", testutil.Sleep(mark)))
	left := atLeastSleepers(t, mark, 1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		v := scrape(t, d, "").value(t, "lineage_tracked_processes")
		if v >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tracked processes %v with the root and its sleeper tracked", v)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var end api.Ended
	d.do("POST", "/v1/sessions/p/close", nil, &end)
	allGone(t, left)
	m := scrape(t, d, "")
	if v := m.value(t, "lineage_tracked_processes"); v != 0 {
		t.Errorf("tracked processes %v after the close", v)
	}
	if v := m.value(t, "lineage_reaps_total", "decision", "reap", "result", "complete"); v != 1 {
		t.Errorf("reaps{reap,complete} = %v after the close", v)
	}
}
