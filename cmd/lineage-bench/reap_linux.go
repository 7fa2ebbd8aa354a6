package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The reap latency of `lineage run`: from the job's last instruction to
// lineage's exit, with N leftovers that obey SIGTERM, beside the floor: the
// least it costs to kill N such processes through pidfds and see each one
// die. Both use the same leftovers (setsid sleep, started by a shell).

// leftovers is the job: it starts n setsid sleepers, then says "exit" on
// stdout as its last instruction.
func leftovers(n int) string {
	return "i=0; while [ $i -lt " + strconv.Itoa(n) + " ]; do setsid sleep 600 </dev/null >/dev/null 2>&1 & i=$((i+1)); done; echo exit"
}

// reapLatency runs the job under lineage and times job exit → lineage exit.
func reapLatency(lineageBin string, n int, backend string) (time.Duration, error) {
	cmd := exec.Command(lineageBin, "run", "--standalone", "--backend", backend, "--linger", "0", "--", "sh", "-c", leftovers(n))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return 0, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	start := time.Now()
	if err != nil || line != "exit\n" {
		cmd.Process.Kill()
		cmd.Wait()
		return 0, fmt.Errorf("lineage run: job said %q: %v", line, err)
	}
	_, _ = io.Copy(io.Discard, stdout)
	err = cmd.Wait()
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("lineage run: %v: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), fmt.Sprintf("%d processes left behind", n)) {
		return 0, fmt.Errorf("lineage run: %d leftovers not all found: %s", n, firstLine(stderr.String()))
	}
	return took, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimPrefix(s, "lineage: job "), "\n")
	return s
}

// killFloor starts the same leftovers as children of this process (a
// child subreaper), then kills them all through pidfds and waits until each
// pidfd says its process is gone; it reaps them after the clock stops.
func killFloor(n int) (time.Duration, error) {
	if err := exec.Command("sh", "-c", leftovers(n)+" >/dev/null").Run(); err != nil {
		return 0, err
	}
	pids, err := sleepingChildren(n)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	fds := make([]unix.PollFd, 0, len(pids))
	for _, pid := range pids {
		// Our own children: their pids can't be reused before we reap them.
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return 0, fmt.Errorf("pidfd_open %d: %w", pid, err)
		}
		defer unix.Close(fd)
		if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil {
			return 0, fmt.Errorf("kill %d: %w", pid, err)
		}
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	for len(fds) > 0 {
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return 0, err
		}
		left := fds[:0]
		for _, p := range fds {
			if p.Revents == 0 {
				left = append(left, p)
			}
		}
		fds = left
	}
	took := time.Since(start)
	for _, pid := range pids {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil)
	}
	return took, nil
}

// sleepingChildren returns the pids of this process's children that run
// sleep, waiting until there are n.
func sleepingChildren(n int) ([]int, error) {
	self := strconv.Itoa(os.Getpid())
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ents, err := os.ReadDir("/proc")
		if err != nil {
			return nil, err
		}
		var pids []int
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			s := string(b)
			f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
			if len(f) > 1 && f[1] == self && strings.Contains(s, "(sleep)") {
				pids = append(pids, pid)
			}
		}
		if len(pids) >= n {
			return pids, nil
		}
	}
	return nil, fmt.Errorf("%d sleepers did not all start", n)
}

// becomeSubreaper makes the leftovers of the floor's shell this process's
// children, so that their pids stay theirs until killFloor reaps them.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("subreaper: %w", err)
	}
	return nil
}

type reapKey struct {
	n    int
	what string // "floor", or a column's name
}

// reapColumn is one lineage binary and backend whose reap latency is
// measured beside the floor.
type reapColumn struct {
	name, bin, backend string
}

// measureReap measures each size, the floor and every column interleaved.
func measureReap(cols []reapColumn, sizes []int, rounds int) (map[reapKey][]float64, error) {
	if err := becomeSubreaper(); err != nil {
		return nil, err
	}
	out := make(map[reapKey][]float64)
	for r := 0; r < rounds; r++ {
		for _, n := range sizes {
			d, err := killFloor(n)
			if err != nil {
				return nil, fmt.Errorf("floor, %d members: %w", n, err)
			}
			out[reapKey{n, "floor"}] = append(out[reapKey{n, "floor"}], float64(d))
			for _, c := range cols {
				d, err := reapLatency(c.bin, n, c.backend)
				if err != nil {
					return nil, fmt.Errorf("%s, %d members: %w", c.name, n, err)
				}
				out[reapKey{n, c.name}] = append(out[reapKey{n, c.name}], float64(d))
			}
		}
	}
	return out, nil
}

func printReap(res map[reapKey][]float64, sizes []int, cols []reapColumn, load string) {
	fmt.Println("### Reap latency: job exit → lineage exit, leftovers that obey SIGTERM (median of interleaved rounds)")
	fmt.Println()
	fmt.Printf("Load average at the start: %s.\n\n", load)
	fmt.Print("| members | floor (pidfd kill + confirm) |")
	for _, c := range cols {
		fmt.Printf(" %s |", c.name)
	}
	fmt.Print("\n|---|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for _, n := range sizes {
		floor := median(res[reapKey{n, "floor"}])
		fmt.Printf("| %d | %s |", n, ms(floor))
		for _, c := range cols {
			m := median(res[reapKey{n, c.name}])
			fmt.Printf(" %s (%.2f×) |", ms(m), m/floor)
		}
		fmt.Println()
	}
	fmt.Println()
}

func ms(ns float64) string { return time.Duration(ns).Round(100 * time.Microsecond).String() }

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}
