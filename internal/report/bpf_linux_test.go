package report

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// recordJob runs script as a root under the real BPF tracker, writing every
// event to a record as `lineage run --record` will: events as they come, a
// leak for each member alive when the root ended, the reap's outcomes, and
// the tracker's losses. It returns the record.
func recordJob(t *testing.T, script string) ([]byte, lineage.Identity) {
	t.Helper()
	b, err := bpf.Open(nil)
	if err != nil && !errors.Is(err, loader.ErrUnavailable) {
		t.Fatalf("open bpf: %v", err)
	}
	testutil.SkipWithoutBPF(t, err)
	t.Cleanup(func() { b.Close() })

	var buf lockedBuffer
	w, err := record.NewWriter(&buf, record.HostHeader([]string{"sh", "-c", script}), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Run(ctx, func(ev lineage.Event) {
			if err := w.Event(ev); err != nil {
				t.Errorf("record event: %v", err)
			}
		})
	}()
	cmd := exec.Command("sh", "-c", script)
	// The reaper never signals its own process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	root, err := b.Spawn(cmd, loader.RootOptions{})
	if err != nil {
		cancel()
		t.Fatalf("spawn: %v", err)
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("job: %v", err)
	}
	members, err := b.Members(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range members {
		must(t, w.Leak(m, "root exited"))
	}
	src := reap.SourceFunc(func() ([]lineage.Member, error) { return b.Members(root) })
	rep, err := reap.Reap(context.Background(), src, reap.Options{
		Grace:   300 * time.Millisecond,
		Contain: func() (lineage.Containment, error) { return b.Contain(root) },
	})
	if err != nil {
		t.Fatalf("reap: %v", err)
	}
	must(t, w.Reap(rep, "root exited"))
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run: %v", err)
	}
	if st, err := b.Stats(); err == nil {
		must(t, w.Loss(st.EventsLost))
	}
	must(t, w.Close())
	return buf.Bytes(), root
}

// lockedBuffer is a bytes.Buffer safe to read while the Writer may write.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *lockedBuffer) Bytes() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	return bytes.Clone(l.buf.Bytes())
}

// TestRecordRealJob records a make -j-like job under the BPF tracker:
// parallel children, a short-lived chain, a daemon left behind (reaped by
// SIGTERM) and one that ignores SIGTERM (reaped by SIGKILL); its report shows
// every process with the right lineage parent, argv and end, leaks marked.
func TestRecordRealJob(t *testing.T) {
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	long := testutil.Sleep(mark)
	script := fmt.Sprintf(`sleep 0.3 & sleep 0.31 & sleep 0.32 & sleep 0.33 &
sh -c 'sh -c "/bin/true chain-%[1]s; :"; :'
(setsid sleep %[2]s &)
( (trap '' TERM; exec sleep %[2]s) & )
wait`, mark, long)
	data, rootID := recordJob(t, script)
	rep := build(t, data)

	byArgv := map[string][]*Process{}
	var root *Process
	rep.Walk(func(p *Process) bool {
		byArgv[strings.Join(p.Argv, " ")] = append(byArgv[strings.Join(p.Argv, " ")], p)
		if p.ID == rootID {
			root = p
		}
		return true
	})
	if root == nil || root.Outcome != lineage.Exited || root.Exit.String() != "exit 0" {
		t.Fatalf("root %+v", root)
	}
	for _, d := range []string{"0.3", "0.31", "0.32", "0.33"} {
		ps := byArgv["sleep "+d]
		if len(ps) != 1 || ps[0].Parent != root.ID || ps[0].Exit.String() != "exit 0" || ps[0].Leaked {
			t.Errorf("worker sleep %s: %+v", d, ps)
		}
	}
	// The chain: root → sh -c '…' → sh -c "…" → /bin/true, which lives
	// well under a millisecond and still shows its argv.
	chain := byArgv["/bin/true chain-"+mark]
	if len(chain) != 1 {
		t.Fatalf("short-lived /bin/true: %v\n%s", chain, data)
	}
	inner := find(rep, chain[0].Parent)
	outer := find(rep, inner.Parent)
	if !strings.HasPrefix(strings.Join(inner.Argv, " "), "sh -c /bin/true") || outer == nil || outer.Parent != root.ID {
		t.Errorf("chain: inner %+v outer %+v", inner, outer)
	}
	sleepers := byArgv["sleep "+long]
	if len(sleepers) != 2 {
		t.Fatalf("daemons %+v", sleepers)
	}
	outcomes := map[lineage.Result]bool{}
	for _, d := range sleepers {
		outcomes[d.Outcome] = true
		if !d.Leaked || !d.Ended || find(rep, d.Parent) == nil || find(rep, d.Parent).Parent != root.ID {
			t.Errorf("daemon %+v: want a leak whose lineage parent is a subshell of the root", d)
		}
	}
	if !outcomes[lineage.Terminated] || !outcomes[lineage.Killed] {
		t.Errorf("daemon outcomes %v, want one terminated and one killed", outcomes)
	}
	if rep.Summary.Leaks != 2 || rep.Summary.Reaped != 2 || rep.Summary.Unended != 0 {
		t.Errorf("summary %+v", rep.Summary)
	}
	var text bytes.Buffer
	must(t, rep.WriteText(&text, TextOptions{}))
	if strings.Count(text.String(), "LEAK sleep "+long) != 2 {
		t.Errorf("leaks not marked:\n%s", text.String())
	}
	t.Logf("report:\n%s", text.String())
}

func find(rep *Report, id lineage.Identity) *Process {
	var out *Process
	rep.Walk(func(p *Process) bool {
		if p.ID == id {
			out = p
		}
		return out == nil
	})
	return out
}
