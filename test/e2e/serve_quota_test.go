package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/server"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// flooder is a Python program, run as uid 65534, that opens up to N event
// streams of one session on the daemon's socket at once (as many as its
// file limit allows), reads each answer's status and error code, prints a
// summary as one JSON line, and holds the streams it got open until its
// stdin closes.
const flooder = `
import json, resource, socket, sys
path, session, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
n = min(n, hard - 32)
req = ("GET /v1/events?session=%s HTTP/1.1\r\nHost: lineage\r\n\r\n" % session).encode()
conns, out = [], {"tried": n, "streams": 0, "codes": {}, "unanswered": 0}
for _ in range(n):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        s.connect(path)
    except OSError:
        out["unanswered"] += 1
        s.close()
        continue
    try:
        s.sendall(req)
    except OSError:
        pass
    conns.append(s)
kept = []
for s in conns:
    s.settimeout(30)
    data = b""
    try:
        while b"\r\n\r\n" not in data:
            chunk = s.recv(4096)
            if not chunk:
                break
            data += chunk
    except OSError:
        pass
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode(errors="replace").split("\r\n")
    status = lines[0].split(" ")[1] if lines[0].startswith("HTTP/1.1 ") else ""
    if status == "200":
        out["streams"] += 1
        kept.append(s)
        continue
    length = 0
    for h in lines[1:]:
        name, _, value = h.partition(":")
        if name.lower() == "content-length":
            length = int(value)
    code = ""
    try:
        while len(body) < length:
            chunk = s.recv(4096)
            if not chunk:
                break
            body += chunk
        code = json.loads(body[:length]).get("code", "")
    except (OSError, ValueError):
        pass
    if not status:
        out["unanswered"] += 1
    else:
        key = status + " " + code
        out["codes"][key] = out["codes"].get(key, 0) + 1
    s.close()
print(json.dumps(out), flush=True)
sys.stdin.read()
`

// rss is a process's resident set, in bytes.
func rss(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS for %d", pid)
	return 0
}

// statusLatency times n of root's GET /v1/status, each on a connection
// of its own, as a client new to the daemon would: the median and the
// slowest.
func (d *daemon) statusLatency(t *testing.T, n int) (p50, max time.Duration) {
	t.Helper()
	var took []time.Duration
	for range n {
		start := time.Now()
		var st api.Status
		c := d.client()
		if err := c.Do(t.Context(), "GET", "/v1/status", nil, &st); err != nil {
			t.Fatalf("root's status: %v", err)
		}
		took = append(took, time.Since(start))
		c.Close()
	}
	slices.Sort(took)
	return took[len(took)/2], took[len(took)-1]
}

// rssBound bounds the daemon's resident set while one uid floods it with
// streams: the daemon's quotas, not the flood, decide what it holds.
const rssBound = 64 << 20

// One uid opens 20,000 event streams (as many as its file limit allows):
// it gets its quota's worth (64, the default), and 429 too_many for the
// rest, past its streams quota or, at the socket, past its connections
// quota. Meanwhile, and while it holds its streams, root's status is
// answered every time (its latency is logged; the benchmark measures it),
// and the daemon's resident set stays under rssBound. The daemon is built
// for the test without the race detector, whose shadow memory would be
// measured too.
func TestServeStreamFloodIsRefused(t *testing.T) {
	d := startDaemonBin(t, plainTracker(t))
	flood := floodStreams(t, d, "connections")
	if flood.Streams != server.DefaultQuotas().Streams {
		t.Errorf("uid 65534 got %d streams, want its quota, %d", flood.Streams, server.DefaultQuotas().Streams)
	}
	if after := rss(t, d.cmd.Process.Pid); after > rssBound {
		t.Errorf("the daemon's RSS is %d MiB during the flood, want under %d MiB", after>>20, rssBound>>20)
	} else {
		t.Logf("the daemon's RSS during the flood: %d MiB", after>>20)
	}
}

// With no quota on its connections, one uid's flood meets the descriptors
// the daemon keeps for root and its own work: its connections past them
// are refused 429 too_many, and root is answered throughout.
func TestServeFDReserveKeepsRootAnswered(t *testing.T) {
	d := startDaemonBin(t, plainTracker(t), "--max-connections", "0", "--fd-reserve", "10000")
	floodStreams(t, d, "files")
}

// plainTracker is lineage-tracker as it ships, without the race
// detector, whose shadow memory a bound on the daemon's memory would
// measure too: the binary under test when the tests run without it, else
// one built for the test.
func plainTracker(t *testing.T) string {
	t.Helper()
	if !raceEnabled {
		return trackerBin
	}
	gotool := testutil.LookTool(t, "go")
	out := filepath.Join(t.TempDir(), "lineage-tracker")
	cmd := exec.Command(gotool, "build", "-o", out, "./cmd/lineage-tracker")
	cmd.Dir = filepath.Join("..", "..")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/lineage-tracker: %v\n%s", err, msg)
	}
	return out
}

// floodResult is what the flooder saw.
type floodResult struct {
	Tried, Streams, Unanswered int
	Codes                      map[string]int
}

// floodStreams has uid 65534 open 20,000 streams of a session of its own,
// while root asks for the daemon's status again and again, and checks that
// the uid got 429 too_many past its quotas, lineage_refused_total counted
// refusals for reason, and root was answered every time.
func floodStreams(t *testing.T, d *daemon, reason string) floodResult {
	t.Helper()
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3 for uid 65534")
	}
	n := asNobody(t, d)
	if msg, code := n.lineage("session", "open", "flood"); code != 0 {
		t.Fatalf("uid 65534's session: %s", msg)
	}
	idle50, idleMax := d.statusLatency(t, 50)
	script := filepath.Join(filepath.Dir(n.bin), "flood.py")
	if err := os.WriteFile(script, []byte(flooder), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := n.cmd(python, script, d.sock, "flood", "20000")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		stdin.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	// Root asks while the flood comes in.
	stop := make(chan struct{})
	during := make(chan []time.Duration, 1)
	go func() {
		var took []time.Duration
		defer func() { during <- took }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			start := time.Now()
			c := d.client()
			var st api.Status
			if err := c.Do(t.Context(), "GET", "/v1/status", nil, &st); err != nil {
				t.Errorf("root's status during the flood: %v", err)
				return
			}
			c.Close()
			took = append(took, time.Since(start))
		}
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	close(stop)
	burst := <-during
	if err != nil {
		t.Fatalf("the flooder: %v", err)
	}
	var got floodResult
	if err := json.Unmarshal([]byte(line), &got); err != nil {
		t.Fatalf("the flooder said %q: %v", line, err)
	}
	t.Logf("flood: %s", line)
	refused := got.Codes["429 too_many"]
	if got.Tried < 10000 || got.Streams == 0 || refused+got.Streams+got.Unanswered != got.Tried || len(got.Codes) != 1 || got.Unanswered > got.Tried/100 {
		t.Errorf("of %d tries: %d streams, answers %v, %d unanswered; want the rest refused 429 too_many", got.Tried, got.Streams, got.Codes, got.Unanswered)
	}
	if len(burst) == 0 {
		t.Error("root was not answered during the flood")
	}
	slices.Sort(burst)
	held50, heldMax := d.statusLatency(t, 50)
	if len(burst) > 0 {
		t.Logf("root's status: idle p50 %v max %v; during the flood's burst (%d asked) p50 %v max %v; while it holds its streams p50 %v max %v (%.2fx idle)",
			idle50, idleMax, len(burst), burst[len(burst)/2], burst[len(burst)-1], held50, heldMax, float64(held50)/float64(idle50))
	}
	if v := scrape(t, d, "").value(t, "lineage_refused_total", "reason", reason); v == 0 {
		t.Errorf("lineage_refused_total{reason=%q} = 0 after the flood", reason)
	}
	return got
}

// tooMany checks that a CLI run as uid 65534 was refused past the quota
// named by flag.
func (n *nobody) tooMany(flag string, args ...string) {
	n.t.Helper()
	msg, code := n.lineage(args...)
	if code == 0 || !strings.Contains(msg, "(429 too_many)") || !strings.Contains(msg, flag) {
		n.t.Errorf("lineage %s as uid 65534: exit %d %q, want refused 429 too_many, naming the limit (%s)", strings.Join(args, " "), code, msg, flag)
	}
}

// Each quota counts what is open at once, for each uid but root: past it,
// 429 too_many naming the limit, and nothing changes; once something is
// closed, there is room again, so a client that opens and closes a session
// per test never meets the sessions quota.
func TestServeQuotas(t *testing.T) {
	t.Run("sessions", func(t *testing.T) {
		d := startDaemon(t, "", "--max-sessions", "3")
		n := asNobody(t, d)
		for i := range 3 {
			if msg, code := n.lineage("session", "open", fmt.Sprintf("q%d", i)); code != 0 {
				t.Fatalf("open %d: %s", i, msg)
			}
		}
		before := snapshot(t, d)
		n.tooMany("--max-sessions", "session", "open", "q3")
		mark := testutil.Marker(t)
		testutil.CheckNoLeaks(t, mark)
		n.tooMany("--max-sessions", "exec", "--session", "q4", "--", "sleep", testutil.Sleep(mark))
		if after := snapshot(t, d); after != before {
			t.Errorf("refusals changed the state:\nbefore %s\nafter  %s", before, after)
		}
		// Root is never limited.
		for i := range 5 {
			d.do("POST", "/v1/sessions", api.OpenSession{ID: fmt.Sprintf("root%d", i)}, nil)
		}
		// What is open at once: a session per test, two hundred tests,
		// each its open and its close, with a third of the quota free.
		if msg, code := n.lineage("session", "close", "q0"); code != 0 {
			t.Fatal(msg)
		}
		refusedBefore := scrape(t, d, "").value(t, "lineage_refused_total", "reason", "sessions")
		if refusedBefore < 2 {
			t.Errorf("lineage_refused_total{reason=\"sessions\"} = %v, want the two refusals (or more: the fast path asks first)", refusedBefore)
		}
		suite := n.cmd("sh", "-c", fmt.Sprintf(`for i in $(seq 200); do
			curl -sf --unix-socket %[1]s -d '{"id":"t'$i'"}' http://lineage/v1/sessions >/dev/null || { echo "open $i failed"; exit 1; }
			curl -sf --unix-socket %[1]s -X POST http://lineage/v1/sessions/t$i/close >/dev/null || { echo "close $i failed"; exit 1; }
		done`, d.sock))
		if out, err := suite.CombinedOutput(); err != nil {
			t.Errorf("a suite of 200 sessions, one at a time: %v %s", err, out)
		}
		if v := scrape(t, d, "").value(t, "lineage_refused_total", "reason", "sessions"); v != refusedBefore {
			t.Errorf("the suite was refused %v times, want none", v-refusedBefore)
		}
	})

	t.Run("keeps", func(t *testing.T) {
		d := startDaemon(t, "", "--max-keeps", "3")
		n := asNobody(t, d)
		mark := testutil.Marker(t)
		testutil.CheckNoLeaks(t, mark)
		// uid 65534's own job, with four sleepers to keep.
		job := n.cmd(n.bin, "exec", "--session", "k", "--kind", "autonomous", "--", "sh", "-c",
			fmt.Sprintf("for i in 1 2 3 4; do sleep %s & done; wait", testutil.Sleep(mark)))
		if err := job.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = job.Process.Kill(); _ = job.Wait() })
		left := atLeastSleepers(t, mark, 4)
		t.Cleanup(func() {
			for _, p := range left {
				testutil.KillIdentity(p.PID, p.StartTicks)
			}
		})
		id := func(p testutil.Proc) string { return fmt.Sprintf("%d@%d", p.PID, p.StartTicks) }
		for _, p := range left[:3] {
			if msg, code := n.lineage("keep", id(p)); code != 0 {
				t.Fatalf("keep %s: %s", id(p), msg)
			}
		}
		// The same keep again is not another.
		if msg, code := n.lineage("keep", id(left[0]), "--ttl", "1h"); code != 0 {
			t.Fatalf("the same keep again: %s", msg)
		}
		n.tooMany("--max-keeps", "keep", id(left[3]))
		var s api.Session
		d.do("GET", "/v1/sessions/k", nil, &s)
		if len(s.Keeps) != 3 {
			t.Errorf("keeps %+v, want 3", s.Keeps)
		}
		if msg, code := n.lineage("keep", "--rm", id(left[1])); code != 0 {
			t.Fatal(msg)
		}
		if msg, code := n.lineage("keep", id(left[3])); code != 0 {
			t.Errorf("a keep once another was removed: %s", msg)
		}
	})

	t.Run("owner watches", func(t *testing.T) {
		d := startDaemon(t, "", "--max-owner-watches", "2")
		n := asNobody(t, d)
		mark := testutil.Marker(t)
		testutil.CheckNoLeaks(t, mark)
		owner := startSleep(t, n.cmd("sleep", testutil.Sleep(mark)))
		for i := range 2 {
			if msg, code := n.lineage("session", "open", fmt.Sprintf("o%d", i), "--owner", owner); code != 0 {
				t.Fatalf("open %d: %s", i, msg)
			}
		}
		n.tooMany("--max-owner-watches", "session", "open", "o2", "--owner", owner)
		if msg, code := n.lineage("session", "open", "o3"); code != 0 {
			t.Errorf("a session with no owner: %s", msg)
		}
		if msg, code := n.lineage("session", "close", "o0"); code != 0 {
			t.Fatal(msg)
		}
		if msg, code := n.lineage("session", "open", "o2", "--owner", owner); code != 0 {
			t.Errorf("an owner watch once another was closed: %s", msg)
		}
	})

	t.Run("records", func(t *testing.T) {
		records := t.TempDir()
		d := startDaemon(t, "", "--max-records", "2", "--record-dir", records)
		n := asNobody(t, d)
		for i := range 2 {
			if msg, code := n.lineage("session", "open", fmt.Sprintf("r%d", i)); code != 0 {
				t.Fatalf("open %d: %s", i, msg)
			}
		}
		n.tooMany("--max-records", "session", "open", "r2")
		// A closed session's record stays open until its late events are
		// through: its room comes back then.
		if msg, code := n.lineage("session", "close", "r0"); code != 0 {
			t.Fatal(msg)
		}
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if _, code := n.lineage("session", "open", "r2"); code == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("no room for a record 30s after a session closed")
			}
		}
	})
}
