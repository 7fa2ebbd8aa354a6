package e2e

import (
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// A session's keeps are the kernel's as the session takes them, before any
// turn end: a program an exe rule keeps is marked spared in the exec
// hook's run, a process kept by identity when the keep is added. A keep
// taken back is the kernel's no more: the program exec'd again is not
// marked. What the marks spared is reaped like the rest once no rule keeps
// it.
func TestServeKeepsAreTheKernelsAsTheyApply(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	// A program of its own, so that the rule's file is no other
	// test's: a copy of sleep.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(sleep)
	if err != nil {
		t.Fatal(err)
	}
	kept := filepath.Join(t.TempDir(), "kept-sleep")
	if err := os.WriteFile(kept, data, 0o755); err != nil {
		t.Fatal(err)
	}
	rule, err := policy.KeepExe(kept)
	if err != nil {
		t.Fatal(err)
	}
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "kk", Kind: "autonomous", Keep: []policy.Keep{rule}}, nil)
	d.execRoot("kk", "autonomous", fmt.Sprintf("setsid %s %s & setsid sleep %s & sleep 0.2", kept, testutil.Sleep(mark), testutil.Sleep(mark)))
	var running, plain testutil.Proc
	testutil.Eventually(t, 20*time.Second, "the kept program and the plain sleeper run", func() bool {
		running, plain = testutil.Proc{}, testutil.Proc{}
		for _, p := range testutil.Find(mark) {
			switch p.Argv[0] {
			case kept:
				running = p
			case "sleep":
				plain = p
			}
		}
		return running.PID != 0 && plain.PID != 0
	})
	runningID := lineage.Identity{PID: uint32(running.PID), StartTicks: running.StartTicks}
	plainID := lineage.Identity{PID: uint32(plain.PID), StartTicks: plain.StartTicks}
	spared := func(ids ...lineage.Identity) map[lineage.Identity]bool {
		t.Helper()
		got, err := bpf.PinnedSpared(d.pin, ids...)
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := spared(runningID, plainID)
	if !got[runningID] {
		t.Errorf("the kept program %v is not marked spared before any turn end: %v", running.Argv, got)
	}
	if v, member := got[plainID]; !member || v {
		t.Errorf("the plain sleeper %v: spared %v, member %v; want a member not spared", plain.Argv, v, member)
	}

	plainRule := plainID.String()
	d.do("POST", "/v1/keeps", api.AddKeep{Process: plainRule}, nil)
	if !spared(plainID)[plainID] {
		t.Errorf("the sleeper kept by identity is not marked spared once its keep is added")
	}

	// execKept runs the kept program once more in the session, and
	// returns the new process.
	seen := map[int]bool{running.PID: true}
	execKept := func() lineage.Identity {
		t.Helper()
		d.execRoot("kk", "autonomous", fmt.Sprintf("setsid %s %s & sleep 0.2", kept, testutil.Sleep(mark)))
		var p testutil.Proc
		testutil.Eventually(t, 20*time.Second, "the kept program exec'd again runs", func() bool {
			for _, q := range testutil.Find(mark) {
				if q.Argv[0] == kept && !seen[q.PID] {
					p = q
					return true
				}
			}
			return false
		})
		seen[p.PID] = true
		return lineage.Identity{PID: uint32(p.PID), StartTicks: p.StartTicks}
	}

	// A daemon started again has its sessions' rules in the kernel.
	d.kill9()
	d.start()
	afterRestart := execKept()
	if !spared(afterRestart)[afterRestart] {
		t.Errorf("the kept program exec'd after a restart is not marked spared")
	}

	d.do("DELETE", "/v1/keeps/"+url.PathEscape(rule.String()), nil, nil)
	againID := execKept()
	if v, member := spared(againID)[againID]; !member || v {
		t.Errorf("the program exec'd after its keep was taken back: spared %v, member %v; want a member not spared", v, member)
	}

	d.do("DELETE", "/v1/keeps/"+url.PathEscape(plainRule), nil, nil)
	left := testutil.Find(mark)
	if len(left) != 4 {
		t.Errorf("before the close: %d processes carry the test's mark, want the 4 it started: %v", len(left), left)
	}
	d.do("POST", "/v1/sessions/kk/close", nil, nil)
	allGone(t, left)
}
