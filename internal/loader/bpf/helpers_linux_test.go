package bpf

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// openBPF loads the tracker for one test; it skips only when BPF can't load
// here, or the kernel lacks what a forced variant needs, and fails instead
// under LINEAGE_REQUIRE_BPF=1 where no variant loads.
func openBPF(tb testing.TB, opts *Options) *Tracker {
	tb.Helper()
	b, err := Open(opts)
	if err != nil && !errors.Is(err, loader.ErrUnavailable) {
		tb.Fatalf("open bpf: %v", err)
	}
	if errors.Is(err, loader.ErrVariantUnsupported) {
		tb.Skipf("variant: %v", err)
	}
	testutil.SkipWithoutBPF(tb, err)
	tb.Cleanup(func() { b.Close() })
	return b
}

// eachVariant runs fn as one subtest per program variant.
func eachVariant(t *testing.T, fn func(t *testing.T, v loader.Variant)) {
	for _, v := range []loader.Variant{loader.VariantFull, loader.VariantCompat} {
		t.Run(string(v), func(t *testing.T) { fn(t, v) })
	}
}

// recorder collects the events of a backend into a tree.
type recorder struct {
	tree   *lineage.Tree
	mu     sync.Mutex
	events []lineage.Event
	stop   func()
}

func record(tb testing.TB, b loader.Backend) *recorder {
	tb.Helper()
	r := &recorder{tree: lineage.NewTree()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- b.Run(ctx, func(ev lineage.Event) {
			r.tree.Apply(ev)
			r.mu.Lock()
			r.events = append(r.events, ev)
			r.mu.Unlock()
		})
	}()
	var once sync.Once
	r.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				tb.Errorf("run: %v", err)
			}
		})
	}
	tb.Cleanup(r.stop)
	return r
}

func (r *recorder) snapshot() []lineage.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// waitFor waits until cond holds, failing tb after timeout (scaled as
// testutil.Eventually scales it).
func waitFor(tb testing.TB, what string, timeout time.Duration, cond func() bool) {
	tb.Helper()
	testutil.Eventually(tb, timeout, what, cond)
}

// job is a spawned root command, waited for in the background.
type job struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// wait returns the command's exit error once it has ended.
func (j *job) wait() error {
	<-j.done
	return j.err
}

// spawn starts a shell script as a root and waits for it in the background.
func spawn(tb testing.TB, b loader.Backend, script string, opts loader.RootOptions) (lineage.Identity, *job) {
	tb.Helper()
	j := &job{cmd: exec.Command("sh", "-c", script), done: make(chan struct{})}
	id, err := b.Spawn(j.cmd, opts)
	if err != nil {
		tb.Fatalf("spawn: %v", err)
	}
	go func() {
		j.err = j.cmd.Wait()
		close(j.done)
	}()
	tb.Cleanup(func() {
		_ = j.cmd.Process.Kill()
		<-j.done
	})
	return id, j
}

// killMembers kills every live member of root by identity: test cleanup.
func killMembers(tb testing.TB, b loader.Backend, root lineage.Identity) {
	tb.Helper()
	ms, err := b.Members(root)
	if err != nil {
		tb.Errorf("members: %v", err)
		return
	}
	for _, m := range ms {
		testutil.KillIdentity(int(m.PID), m.StartTicks)
	}
}

func memberSet(tb testing.TB, b loader.Backend, root lineage.Identity) map[lineage.Identity]lineage.Member {
	tb.Helper()
	ms, err := b.Members(root)
	if err != nil {
		tb.Fatalf("members: %v", err)
	}
	out := make(map[lineage.Identity]lineage.Member, len(ms))
	for _, m := range ms {
		out[m.Identity] = m
	}
	return out
}
