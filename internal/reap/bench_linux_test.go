//go:build linux

package reap

import (
	"context"
	"fmt"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
)

// BenchmarkReap measures reap latency against the floor, side by side in one
// run, for N members blocked in read(2) (plain forks of one shell, which
// waits for them):
//
//   - floor: pidfd_open + SIGKILL each, then poll(2) the pidfds until all
//     are readable: the least it costs to kill N processes and confirm it;
//   - obey: Reap, the members exit on SIGTERM;
//   - ignore: Reap, the members ignore SIGTERM; the reaper sees it in their
//     stat and kills them at once, without the 100 ms grace.
//
// The containment is a given name (these members don't fork). Starting the
// members is not timed but is slow (a fork costs a millisecond or more on a
// VM: the whole run takes minutes), so run it with a fixed count:
//
//	go test -run '^$' -bench BenchmarkReap -benchtime 2x ./internal/reap
//
// docs/benchmarks.md has the figures, and those of the
// whole path (job exit → lineage exit) that lineage-bench measures.
func BenchmarkReap(b *testing.B) {
	const grace = 100 * time.Millisecond
	for _, n := range []int{100, 1000, 5000} {
		b.Run(fmt.Sprintf("floor/n=%d", n), func(b *testing.B) {
			benchReap(b, n, false, func(ms []pinned) error { return killFloor(ms) })
		})
		b.Run(fmt.Sprintf("obey/n=%d", n), func(b *testing.B) {
			benchReap(b, n, false, func(ms []pinned) error { return reapPinned(ms, grace) })
		})
		b.Run(fmt.Sprintf("ignore/grace=%v/n=%d", grace, n), func(b *testing.B) {
			b.ReportMetric(grace.Seconds()*1000, "grace-ms")
			benchReap(b, n, true, func(ms []pinned) error { return reapPinned(ms, grace) })
		})
	}
}

// pinned is a member of a benchmark lineage and a pidfd of the benchmark's
// own, by which the Source tells whether it lives.
type pinned struct {
	id lineage.Identity
	fd int
}

var benchThen = "wait"

func benchReap(b *testing.B, n int, ignoreTerm bool, end func([]pinned) error) {
	var took time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		l := newBareLab(b)
		j := l.start(manyScriptThen(n, ignoreTerm, benchThen))
		ms := j.membersBelowRoot(n)
		b.StartTimer()
		start := time.Now()
		if err := end(ms); err != nil {
			b.Fatal(err)
		}
		took += time.Since(start)
		b.StopTimer()
		for _, m := range ms {
			if running(m.id) {
				b.Fatalf("%s survived", m.id)
			}
			unix.Close(m.fd)
		}
		j.stop()
	}
	b.ReportMetric(float64(took.Microseconds())/float64(b.N*n), "µs/member")
	b.ReportMetric(float64(took.Microseconds())/1000/float64(b.N), "ms/reap")
}

// membersBelowRoot waits for the n children of the job's shell and pins
// them. The shell itself is not a member: it reaps them as they die.
func (j *job) membersBelowRoot(n int) []pinned {
	j.l.t.Helper()
	procs := scanProc()
	root := int(j.root.PID)
	var out []pinned
	for pid, st := range procs {
		if st.ppid != root {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			j.l.t.Fatal(err)
		}
		if again, ok := readStat(pid); !ok || again.id != st.id {
			j.l.t.Fatalf("pid %d changed while pinned", pid)
		}
		out = append(out, pinned{id: st.id, fd: fd})
		j.l.record(st.id, "member")
	}
	if len(out) != n {
		j.l.t.Fatalf("found %d members, want %d", len(out), n)
	}
	return out
}

// killFloor kills every member through a pidfd and polls until all are gone.
func killFloor(ms []pinned) error {
	fds := make([]unix.PollFd, 0, len(ms))
	for _, m := range ms {
		fd, err := unix.PidfdOpen(int(m.id.PID), 0)
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
			return err
		}
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	for len(fds) > 0 {
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return err
		}
		left := fds[:0]
		for _, p := range fds {
			if p.Revents == 0 {
				left = append(left, p)
			}
		}
		fds = left
	}
	return nil
}

// reapPinned reaps the members, with a Source that lists those whose pidfd
// is not yet readable.
func reapPinned(ms []pinned, grace time.Duration) error {
	fds := make([]unix.PollFd, len(ms))
	src := SourceFunc(func() ([]lineage.Member, error) {
		for i, m := range ms {
			fds[i] = unix.PollFd{Fd: int32(m.fd), Events: unix.POLLIN}
		}
		if _, err := unix.Poll(fds, 0); err != nil {
			return nil, err
		}
		var out []lineage.Member
		for i, m := range ms {
			if fds[i].Revents == 0 {
				out = append(out, lineage.Member{Identity: m.id})
			}
		}
		return out, nil
	})
	rep, err := Reap(context.Background(), src, Options{
		Grace:   grace,
		Contain: func() (lineage.Containment, error) { return "given", nil },
	})
	if err != nil {
		return err
	}
	if len(rep.Outcomes) != len(ms) {
		return fmt.Errorf("%d outcomes for %d members", len(rep.Outcomes), len(ms))
	}
	return nil
}
