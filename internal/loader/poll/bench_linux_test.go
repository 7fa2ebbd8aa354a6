package poll

import (
	"fmt"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// startSleepers starts a shell that starts n sleepers and waits for them,
// and returns its identity once they all run. The sleepers are killed by
// identity, and the shell through its handle, when tb ends; a leak fails tb.
func startSleepers(tb testing.TB, n int) lineage.Identity {
	tb.Helper()
	marker := testutil.Marker(tb)
	testutil.CheckNoLeaks(tb, marker)
	// Long enough for the slowest benchmark (minutes at 5,000 processes),
	// finite all the same; killed at the end.
	arg := "900." + marker
	cmd := exec.Command("sh", "-c", fmt.Sprintf("i=0; while [ $i -lt %d ]; do sleep %s & i=$((i+1)); done; wait", n, arg))
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		for _, pr := range testutil.Find(marker) {
			testutil.KillIdentity(pr.PID, pr.StartTicks)
		}
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	start, _, err := testutil.StartTicks(cmd.Process.Pid)
	if err != nil {
		tb.Fatal(err)
	}
	deadline := time.Now().Add(2*time.Minute + time.Duration(n)*10*time.Millisecond)
	for len(testutil.Find(marker)) < n {
		if time.Now().After(deadline) {
			tb.Fatalf("only %d of %d sleepers started", len(testutil.Find(marker)), n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return lineage.Identity{PID: uint32(cmd.Process.Pid), StartTicks: start}
}

// cpuClock measures the calling goroutine's thread CPU time; it pins the
// goroutine to its thread until stop.
type cpuClock struct {
	cpu  time.Duration
	wall time.Time
}

func startCPUClock() cpuClock {
	runtime.LockOSThread()
	cpu, _ := threadCPU()
	return cpuClock{cpu: cpu, wall: time.Now()}
}

func (c cpuClock) stop() (cpu, wall time.Duration) {
	end, _ := threadCPU()
	wall = time.Since(c.wall)
	runtime.UnlockOSThread()
	return end - c.cpu, wall
}

// BenchmarkProcScan measures a full scan of /proc (list every process, read
// every stat), side by side: with procfs; with the lean reader opening,
// reading and closing each stat; with the lean reader keeping the stat files
// open between scans, as the poller does; and a whole poll of the proc
// backend (scan and difference) tracking the sleepers as members. Metrics
// are per process on the machine, per scan.
func BenchmarkProcScan(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("sleepers=%d", n), func(b *testing.B) {
			root := startSleepers(b, n)
			fs, err := proc.Open("/proc")
			if err != nil {
				b.Fatal(err)
			}
			report := func(b *testing.B, procs int, cpu, wall time.Duration, scans int) {
				per := float64(procs * scans)
				b.ReportMetric(float64(cpu.Nanoseconds())/per/1e3, "cpu-µs/proc")
				b.ReportMetric(float64(wall.Nanoseconds())/per/1e3, "wall-µs/proc")
				b.ReportMetric(float64(cpu.Nanoseconds())/float64(scans)/1e6, "cpu-ms/scan")
				b.ReportMetric(float64(procs), "procs")
			}
			b.Run("procfs", func(b *testing.B) {
				procs, scans := 0, 0
				c := startCPUClock()
				for b.Loop() {
					pids, err := fs.PIDs()
					if err != nil {
						b.Fatal(err)
					}
					for _, pid := range pids {
						_, _ = fs.Stat(pid)
					}
					procs, scans = len(pids), scans+1
				}
				cpu, wall := c.stop()
				report(b, procs, cpu, wall, scans)
			})
			b.Run("lean-open-read-close", func(b *testing.B) {
				r := fs.StatReader()
				var pids []int
				procs, scans := 0, 0
				c := startCPUClock()
				for b.Loop() {
					pids, err = r.PIDs(pids)
					if err != nil {
						b.Fatal(err)
					}
					for _, pid := range pids {
						_, _ = r.Stat(pid)
					}
					procs, scans = len(pids), scans+1
				}
				cpu, wall := c.stop()
				report(b, procs, cpu, wall, scans)
			})
			b.Run("lean-kept-open", func(b *testing.B) {
				r := fs.StatReader()
				defer r.Close()
				_, _ = r.Scan(func(lineage.Stat) {}, nil) // open them all first
				procs, scans := 0, 0
				c := startCPUClock()
				for b.Loop() {
					procs, err = r.Scan(func(lineage.Stat) {}, nil)
					if err != nil {
						b.Fatal(err)
					}
					scans++
				}
				cpu, wall := c.stop()
				report(b, procs, cpu, wall, scans)
			})
			b.Run("poll", func(b *testing.B) {
				p, err := Open(&Options{Interval: time.Hour})
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				if err := p.Register(root, loader.RootOptions{}); err != nil {
					b.Fatal(err)
				}
				if ms, _ := p.Members(root); len(ms) < n {
					b.Fatalf("%d members, want %d", len(ms), n+1)
				}
				scans := 0
				c := startCPUClock()
				for b.Loop() {
					p.scanMu.Lock()
					if err := p.pollLocked(); err != nil {
						b.Fatal(err)
					}
					p.scanMu.Unlock()
					scans++
				}
				cpu, wall := c.stop()
				report(b, p.Polling().Processes, cpu, wall, scans)
			})
		})
	}
}

// BenchmarkProcPollerCPU runs the proc backend with its default, adaptive
// interval for a few seconds per iteration, tracking the sleepers, and
// reports the share of one core the whole process used meanwhile (the
// poller's budget is 5 %) and the interval it settled on.
func BenchmarkProcPollerCPU(b *testing.B) {
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("sleepers=%d", n), func(b *testing.B) {
			root := startSleepers(b, n)
			p, err := Open(nil)
			if err != nil {
				b.Fatal(err)
			}
			defer p.Close()
			if err := p.Register(root, loader.RootOptions{}); err != nil {
				b.Fatal(err)
			}
			// Let the interval settle on the cost of a scan.
			time.Sleep(3 * time.Second)
			var used, elapsed time.Duration
			for b.Loop() {
				cpu0, wall0 := processCPU(), time.Now()
				time.Sleep(5 * time.Second)
				used += processCPU() - cpu0
				elapsed += time.Since(wall0)
			}
			ps := p.Polling()
			b.ReportMetric(100*used.Seconds()/elapsed.Seconds(), "%core")
			b.ReportMetric(float64(ps.Interval.Milliseconds()), "interval-ms")
			b.ReportMetric(float64(ps.ScanCPU.Microseconds())/1e3, "scan-cpu-ms")
			b.ReportMetric(float64(ps.Processes), "procs")
		})
	}
}

// processCPU returns the CPU time this process has used, all threads.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
