package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// A leftover's argv can't put raw control characters on lineage's stderr,
// nor forge a line of lineage's own.
func TestRunOutputCannotBeForged(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			script := fmt.Sprintf(`sh -c 'sleep %s; :' "$(printf '\033[2J\nlineage: nothing was left behind\r')" &`+settle, testutil.Sleep(mark))
			res := runJob(t, mark, nil, "--backend", backend, "--", "sh", "-c", script)
			if strings.ContainsAny(res.stderr, "\x1b\r") {
				t.Errorf("raw control characters on stderr:\n%q", res.stderr)
			}
			for _, line := range strings.Split(res.stderr, "\n") {
				if line == "lineage: nothing was left behind" {
					t.Errorf("a forged line on stderr:\n%s", res.stderr)
				}
			}
			// (The proc backend may list the leftover by its parent's argv,
			// seen before it exec'd: the escaped form is not required.)
		})
	}
}

// 200 leftovers with 100 KiB of argv each: lineage's output and memory stay
// bounded; the table lists 50 and counts the rest; --report has them all,
// their argv cut at 4 KiB and marked.
func TestRunOutputAndMemoryAreBounded(t *testing.T) {
	for _, backend := range backends {
		t.Run(backend, func(t *testing.T) {
			requireBackend(t, backend)
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			// Each shell says when its sleep runs; the job ends once all
			// 200 do (a loaded machine takes its time to fork them).
			ready := filepath.Join(t.TempDir(), "ready")
			script := fmt.Sprintf(`big=$(head -c 102400 /dev/zero | tr '\0' x); : > %[2]q
i=0; while [ $i -lt 200 ]; do sh -c 'sleep %[1]s & echo >> "$0"; wait' %[2]q "$big" & i=$((i+1)); done
while [ "$(wc -l < %[2]q)" -lt 200 ]; do sleep 0.02; done`, testutil.Sleep(mark), ready)
			res := runJob(t, mark, nil, "--backend", backend, "--", "sh", "-c", script)
			if n := len(res.stderr); n > 400*1024 {
				t.Errorf("lineage printed %d bytes", n)
			}
			rows := strings.Count(res.stderr, "\n  ") // table rows, header included
			if rows > 51 || !strings.Contains(res.stderr, "more (-v or --report lists every one)") {
				t.Errorf("%d table lines, want at most 50 rows and a summary; stderr starts:\n%.2000s", rows, res.stderr)
			}
			if res.report == nil || res.report.Reap == nil || len(res.report.Reap.Outcomes) < 400 {
				t.Fatalf("the report does not list every member")
			}
			cut := 0
			for _, o := range res.report.Reap.Outcomes {
				n := 0
				for _, a := range o.Argv {
					n += len(a) + 1
				}
				if n > lineage.MaxArgvBytes+len(lineage.ArgvCut)+2 {
					t.Fatalf("argv of %d bytes in the report", n)
				}
				if len(o.Argv) > 0 && o.Argv[len(o.Argv)-1] == lineage.ArgvCut {
					cut++
				}
			}
			// (The bpf backend's exec events carry a bounded argv of their
			// own, which the kernel side cuts.)
			if backend == loader.BackendProc && cut < 200 {
				t.Errorf("%d argvs marked cut, want the 200 long ones", cut)
			}
			t.Logf("max RSS %d KiB", res.maxRSS)
			// Before the bounds, 66 MiB; now about 34 MiB, and about 85
			// MiB under the race detector, which adds its own.
			bound := int64(48 * 1024)
			if raceEnabled {
				bound = 128 * 1024
			}
			if res.maxRSS == 0 || res.maxRSS > bound {
				t.Errorf("lineage reached %d KiB of RSS, bound %d", res.maxRSS, bound)
			}
		})
	}
}
