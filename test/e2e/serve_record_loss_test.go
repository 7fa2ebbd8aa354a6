package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// A daemon with a one-page ring buffer is stopped (SIGSTOP) while two
// sessions' roots each run sixty short-lived processes. Each session's
// record places the loss from the stop on (before the close), counts every
// event the daemon lost, and names only its own session's processes.
func TestServeRecordPlacesWhatItLoses(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "records")
	d := startDaemon(t, "", "--record-dir", dir, "--ring-bytes", "4K")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	work := t.TempDir()
	start := filepath.Join(work, "go")
	sessions := []string{"lossa", "lossb"}
	for _, s := range sessions {
		// Each process of the burst logs its own pid.
		script := fmt.Sprintf(`# %[5]s
touch %[1]s.ready; while [ ! -e %[2]s ]; do sleep 0.02; done
i=0; while [ $i -lt 60 ]; do sh -c 'echo $$ >> %[1]s.pids; exec /bin/true' lossy-%[3]s-$i; i=$((i + 1)); done
touch %[1]s.done; sleep %[4]s`, filepath.Join(work, s), start, s, testutil.Sleep(mark), mark)
		d.startExec(s, "interactive", "sh", "-c", script)
	}
	exists := func(p string) func() bool {
		return func() bool { _, err := os.Stat(p); return err == nil }
	}
	for _, s := range sessions {
		waitFor(t, s+"'s root to start", exists(filepath.Join(work, s+".ready")))
	}
	// Each record begins with its session's first event: before the stop.
	waitFor(t, "both sessions' records", func() bool { return len(recordFiles(t, dir)) == len(sessions) })
	base := scrape(t, d, "").value(t, "lineage_events_lost_total")
	if err := d.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := proc.BootTime()
	t.Cleanup(func() { _ = d.cmd.Process.Signal(syscall.SIGCONT) })
	if err := os.WriteFile(start, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, s := range sessions {
		waitFor(t, s+"'s burst", exists(filepath.Join(work, s+".done")))
	}
	if err := d.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	var lost float64
	waitFor(t, "the daemon to count its losses", func() bool {
		lost = scrape(t, d, "").value(t, "lineage_events_lost_total") - base
		return lost > 0
	})
	for _, s := range sessions {
		d.do("POST", "/v1/sessions/"+s+"/close", nil, nil)
	}
	// The roots' last events (touch's exit) may still find the ring full
	// after the test saw them done, until the daemon has resumed and read
	// it: the losses lie between the stop and the closes.
	closed := proc.BootTime()

	pids := map[string]map[uint32]bool{}
	for _, s := range sessions {
		pids[s] = map[uint32]bool{}
		raw, err := os.ReadFile(filepath.Join(work, s+".pids"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Fields(string(raw)) {
			var pid uint32
			fmt.Sscan(f, &pid)
			pids[s][pid] = true
		}
	}
	for _, s := range sessions {
		var path string
		waitFor(t, s+"'s record", func() bool {
			for _, f := range recordFiles(t, dir) {
				if strings.HasSuffix(f, "-"+s+".jsonl") {
					path = filepath.Join(dir, f)
				}
			}
			return path != ""
		})
		// The record is closed, its losses written, once the late events
		// are through: they count all the daemon lost.
		var lines []recordedEvent
		var counted uint64
		waitFor(t, s+"'s losses", func() bool {
			lines, counted = readRecordLines(t, path), 0
			for _, ev := range lines {
				if ev.Kind == record.KindLoss && ev.Reason == "events lost" {
					counted += ev.Count
				}
			}
			return float64(counted) >= lost
		})
		other := sessions[1]
		if s == other {
			other = sessions[0]
		}
		named := 0
		for _, ev := range lines {
			if ev.Kind != record.KindLoss || ev.Reason != "events lost" {
				continue
			}
			if ev.From < stopped || ev.To > closed {
				t.Errorf("%s: a loss of %d placed %v–%v, want from the stop to the close, %v–%v", s, ev.Count, ev.From, ev.To, stopped, closed)
			}
			for _, m := range ev.Members {
				named++
				if pids[other][m.Process.PID] {
					t.Errorf("%s's record names %v, a process of %s", s, m.Process, other)
				}
			}
		}
		if named == 0 {
			t.Errorf("%s's record names none of its processes whose events were lost", s)
		}
		t.Logf("%s: %d events lost daemon-wide, %d processes of its own named", s, counted, named)
	}
	allGone(t, sleepers(mark))
}
