package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// The reap at every width: the same N leftovers (setsid'd sleepers that
// obey SIGTERM, started by a shell that waits until they all run sleep and
// then says "exit" as its last instruction) ended by cgroup.kill (the leftovers born in a scratch cgroup), by a
// minimal pidfd killer (SIGTERM to each through a pidfd, then each death
// seen on its pidfd), by `lineage run` with a tracker of its own, by
// `lineage run` through the daemon, and by a session close. Each is timed
// from the job's exit (the shell's "exit"; for the close, the request)
// to the reaper's end (its exit; the killers' last death; the close's
// answer), interleaved round by round.

// leftovers is a job that starts n setsid sleepers and exits: the serve
// benchmarks' roots.
func leftovers(n int) string {
	return "i=0; while [ $i -lt " + strconv.Itoa(n) + " ]; do setsid sleep 600 </dev/null >/dev/null 2>&1 & i=$((i+1)); done"
}

// reapJob is the reap benchmark's job: it starts n setsid sleepers
// (sleep 600.TAG, TAG naming this round), says "ready", waits for a line
// on stdin, then says "exit" as its last instruction. Every reaper is
// timed from the same state: all n sleepers running sleep, the job just
// exited.
func reapJob(n int, tag string) string {
	return "i=0; while [ $i -lt " + strconv.Itoa(n) + " ]; do setsid sleep 600." + tag + " </dev/null >/dev/null 2>&1 & i=$((i+1)); done; echo ready; read go; echo exit"
}

// heldJob is a started reapJob: its stdin and stdout.
type heldJob struct {
	in  io.WriteCloser
	out *bufio.Reader
}

// hold wires cmd's stdin and stdout to a heldJob; start cmd after.
func hold(cmd *exec.Cmd) (*heldJob, error) {
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	return &heldJob{in: in, out: bufio.NewReader(out)}, nil
}

// release waits until the job has started its n sleepers and they all run
// sleep, lets it exit, and returns once it has said "exit": with the
// sleepers' pids, and the moment it was let go, from which every reaper
// is timed. The job's last steps (it reads the line, says "exit", exits)
// are in every reaper's time alike; a clock started when this process
// reads "exit" would start late whenever the process is slow to get the
// CPU back, and would time the reaper's work only in part.
func (j *heldJob) release(n int, tag string) (pids []int, start time.Time, err error) {
	if line, err := j.out.ReadString('\n'); err != nil || line != "ready\n" {
		return nil, start, fmt.Errorf("the job said %q: %v", line, err)
	}
	if pids, err = awaitSleepers(n, tag); err != nil {
		return nil, start, err
	}
	start = time.Now()
	if _, err := io.WriteString(j.in, "go\n"); err != nil {
		return nil, start, err
	}
	j.in.Close()
	if line, err := j.out.ReadString('\n'); err != nil || line != "exit\n" {
		return nil, start, fmt.Errorf("the job said %q: %v", line, err)
	}
	return pids, start, nil
}

// awaitSleepers waits until n processes run `sleep 600.TAG`, and returns
// their pids.
func awaitSleepers(n int, tag string) ([]int, error) {
	want := "sleep\x00600." + tag + "\x00"
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
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
			if b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline"); err == nil && string(b) == want {
				pids = append(pids, pid)
			}
		}
		if len(pids) >= n {
			return pids, nil
		}
	}
	return nil, fmt.Errorf("%d sleepers did not all start", n)
}

// runReap runs the job under `lineage run` (through the daemon at sock
// when it is set) and times job exit → lineage exit.
func runReap(lineageBin, sock string, n int, tag string) (time.Duration, error) {
	args := []string{"run", "--linger", "0"}
	if sock == "" {
		args = append(args, "--standalone", "--backend", "bpf")
	}
	cmd := exec.Command(lineageBin, append(args, "--", "sh", "-c", reapJob(n, tag))...)
	cmd.Env = append(os.Environ(), "LINEAGE_SOCKET="+orNowhere(sock))
	j, err := hold(cmd)
	if err != nil {
		return 0, err
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	_, start, err := j.release(n, tag)
	if err != nil {
		_ = cmd.Process.Kill() // our child, not yet waited for
		_ = cmd.Wait()
		return 0, fmt.Errorf("lineage run: %w", err)
	}
	_, _ = io.Copy(io.Discard, j.out)
	err = cmd.Wait()
	took := time.Since(start)
	if err != nil {
		return 0, fmt.Errorf("lineage run: %v: %s", err, stderr.String())
	}
	if !strings.Contains(stderr.String(), fmt.Sprintf("%d %s left behind", n, map[bool]string{true: "process", false: "processes"}[n == 1])) {
		return 0, fmt.Errorf("lineage run: %d leftovers not all found: %s", n, firstLine(stderr.String()))
	}
	if sock != "" && !strings.Contains(stderr.String(), "via daemon") {
		return 0, fmt.Errorf("lineage run did not run through the daemon: %s", firstLine(stderr.String()))
	}
	return took, nil
}

// orNowhere is sock, or a socket no daemon listens on.
func orNowhere(sock string) string {
	if sock == "" {
		return "/nonexistent/lineage-bench.sock"
	}
	return sock
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimPrefix(s, "lineage: job "), "\n")
	return s
}

// pidfdKill starts the leftovers as children of this process (a child
// subreaper), then, once the job has exited, sends sig to each through a
// pidfd and waits until each pidfd says its process is gone; it reaps
// them after the clock stops. It is the least a reaper of identities can
// do: no check, no report.
func pidfdKill(n int, sig unix.Signal, tag string) (empty, reaped time.Duration, err error) {
	cmd := exec.Command("sh", "-c", reapJob(n, tag))
	j, err := hold(cmd)
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	pids, start, err := j.release(n, tag)
	if err != nil {
		_ = cmd.Process.Kill() // our child, not yet waited for
		_ = cmd.Wait()
		return 0, 0, err
	}
	// The job's exit makes its sleepers this process's children (it is
	// a child subreaper): their pids stay theirs until reaped.
	_ = cmd.Wait()
	waited := false
	defer func() {
		if !waited {
			reapChildren(pids)
		}
	}()
	fds := make([]unix.PollFd, 0, len(pids))
	for _, pid := range pids {
		// Our own children: their pids can't be reused before we reap them.
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			return 0, 0, fmt.Errorf("pidfd_open %d: %w", pid, err)
		}
		defer unix.Close(fd)
		if err := unix.PidfdSendSignal(fd, sig, nil, 0); err != nil {
			return 0, 0, fmt.Errorf("signal %d: %w", pid, err)
		}
		fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
	}
	for len(fds) > 0 {
		if _, err := unix.Poll(fds, -1); err != nil && err != unix.EINTR {
			return 0, 0, err
		}
		left := fds[:0]
		for _, p := range fds {
			if p.Revents == 0 {
				left = append(left, p)
			}
		}
		fds = left
	}
	empty = time.Since(start)
	reapChildren(pids)
	waited = true
	return empty, time.Since(start), nil
}

// cgroupKill starts the job in a scratch cgroup of the unified hierarchy
// (clone3 into it: its leftovers are born there), then, once the job has
// exited, writes 1 to cgroup.kill and waits until cgroup.events says the
// cgroup is empty. The leftovers are reparented to this process (a child
// subreaper), which reaps them after the clock stops.
func cgroupKill(root string, n int, tag string) (empty, reaped time.Duration, err error) {
	dir, err := os.MkdirTemp(root, "lineage-bench-")
	if err != nil {
		return 0, 0, fmt.Errorf("scratch cgroup: %w", err)
	}
	defer os.Remove(dir)
	cg, err := os.Open(dir)
	if err != nil {
		return 0, 0, err
	}
	defer cg.Close()
	cmd := exec.Command("sh", "-c", reapJob(n, tag))
	cmd.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	j, err := hold(cmd)
	if err != nil {
		return 0, 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, 0, fmt.Errorf("start in the cgroup: %w", err)
	}
	pids, start, err := j.release(n, tag)
	if err != nil {
		_ = cmd.Process.Kill() // our child, not yet waited for
		_ = cmd.Wait()
		return 0, 0, err
	}
	// The job's exit makes its sleepers this process's children (it is
	// a child subreaper): their pids stay theirs until reaped.
	_ = cmd.Wait()
	waited := false
	defer func() {
		if !waited {
			reapChildren(pids)
		}
	}()
	events, err := os.Open(filepath.Join(dir, "cgroup.events"))
	if err != nil {
		return 0, 0, err
	}
	defer events.Close()
	if err := os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0); err != nil {
		return 0, 0, fmt.Errorf("cgroup.kill: %w", err)
	}
	// cgroup.events is a pollable file: a change of populated wakes
	// POLLPRI.
	buf := make([]byte, 256)
	for {
		k, err := events.ReadAt(buf, 0)
		if err != nil && err != io.EOF {
			return 0, 0, err
		}
		if bytes.Contains(buf[:k], []byte("populated 0")) {
			empty = time.Since(start)
			reapChildren(pids)
			waited = true
			return empty, time.Since(start), nil
		}
		fds := []unix.PollFd{{Fd: int32(events.Fd()), Events: unix.POLLPRI}}
		if _, err := unix.Poll(fds, 1000); err != nil && err != unix.EINTR {
			return 0, 0, err
		}
	}
}

// unifiedRoot is where the unified cgroup hierarchy (cgroup2) is mounted,
// or "" when it is not.
func unifiedRoot() string {
	raw, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	for line := range strings.Lines(string(raw)) {
		pre, post, ok := strings.Cut(line, " - ")
		f := strings.Fields(pre)
		if ok && len(f) > 4 && strings.HasPrefix(post, "cgroup2 ") {
			return f[4]
		}
	}
	return ""
}

// reapChildren waits for each of pids, this process's children, once it
// has died.
func reapChildren(pids []int) {
	for _, pid := range pids {
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, 0, nil)
	}
}

// becomeSubreaper makes the leftovers of the floor's shell this process's
// children, so that their pids stay theirs until they are reaped.
func becomeSubreaper() error {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("subreaper: %w", err)
	}
	return nil
}

// The reapers, in the table's order. cgroup.kill and the pidfd killer are
// timed twice in each round: until their leftovers are dead, and until
// they are reaped too (wait4, one by one), as lineage run, their subreaper,
// reaps them before it exits.
const (
	reaperCgroup       = "cgroup.kill"
	reaperCgroupReaped = "cgroup.kill + wait4"
	reaperPidfd        = "pidfd killer"
	reaperPidfdReaped  = "pidfd killer + wait4"
	reaperRun          = "`lineage run`"
	reaperDaemon       = "`lineage run` via daemon"
	reaperClose        = "session close"
)

var reapers = []string{reaperCgroup, reaperCgroupReaped, reaperPidfd, reaperPidfdReaped, reaperRun, reaperDaemon, reaperClose}

type reapKey struct {
	n      int
	reaper string
}

// measureReap times every reaper at every size, interleaved round by
// round; a reaper this machine can't run (no cgroup2) is left out.
// Every reaper and job runs on all the machine's CPUs, as users' reaps do:
// make bench pins this process to CPU 0, which they would inherit, and a
// reap on one CPU adds the reaper's work to its victims' exits where on
// more it can run beside them.
func measureReap(lineageBin string, sizes []int, rounds int) (map[reapKey][]float64, []string, error) {
	if err := becomeSubreaper(); err != nil {
		return nil, nil, err
	}
	var saved unix.CPUSet
	if err := unix.SchedGetaffinity(0, &saved); err != nil {
		return nil, nil, fmt.Errorf("affinity: %w", err)
	}
	all := onlineCPUsBut(-1)
	if err := setAffinity(&all); err != nil {
		return nil, nil, err
	}
	// What follows is pinned as before; a thread that can't be is no matter.
	defer func() { _ = setAffinity(&saved) }()
	d, err := startBenchDaemon(lineageBin, false, "")
	if err != nil {
		return nil, nil, fmt.Errorf("daemon: %w", err)
	}
	defer d.stop()
	cgroups := unifiedRoot()
	var cols []string
	for _, r := range reapers {
		if (r != reaperCgroup && r != reaperCgroupReaped) || cgroups != "" {
			cols = append(cols, r)
		}
	}
	out := make(map[reapKey][]float64)
	for round := 0; round < rounds; round++ {
		for _, n := range sizes {
			for _, r := range cols {
				var took, reaped time.Duration
				tag := fmt.Sprintf("%d%03d%06d", round, n%1000, os.Getpid()%1000000)
				switch r {
				case reaperCgroupReaped, reaperPidfdReaped:
					continue // timed with the reaper before it
				case reaperCgroup:
					took, reaped, err = cgroupKill(cgroups, n, tag)
					out[reapKey{n, reaperCgroupReaped}] = append(out[reapKey{n, reaperCgroupReaped}], float64(reaped))
				case reaperPidfd:
					took, reaped, err = pidfdKill(n, unix.SIGTERM, tag)
					out[reapKey{n, reaperPidfdReaped}] = append(out[reapKey{n, reaperPidfdReaped}], float64(reaped))
				case reaperRun:
					took, err = runReap(lineageBin, "", n, tag)
				case reaperDaemon:
					took, err = runReap(lineageBin, d.sock, n, tag)
				case reaperClose:
					took, err = closeHeld(d, fmt.Sprintf("bench-reap-%d-%d", round, n), n, tag)
				}
				if err != nil {
					return nil, nil, fmt.Errorf("%s, %d leftovers: %w", r, n, err)
				}
				out[reapKey{n, r}] = append(out[reapKey{n, r}], float64(took))
			}
		}
	}
	return out, cols, nil
}

func printReap(res map[reapKey][]float64, sizes []int, cols []string, rounds int, load string) {
	fmt.Println("### Reap at every width: job exit → reaper exit, leftovers that obey SIGTERM")
	fmt.Println()
	fmt.Printf("Median of %d interleaved rounds, min–max in brackets; ×: against cgroup.kill in the same rounds. Every reaper and job on all %d CPUs. Load average at the start: %s.\n\n",
		rounds, machineCPUs(), load)
	fmt.Print("| leftovers |")
	for _, c := range cols {
		fmt.Printf(" %s |", c)
	}
	fmt.Print("\n|---|" + strings.Repeat("---|", len(cols)) + "\n")
	for _, n := range sizes {
		base := median(res[reapKey{n, reaperCgroup}])
		fmt.Printf("| %d |", n)
		for _, c := range cols {
			xs := res[reapKey{n, c}]
			m := median(xs)
			fmt.Printf(" %s [%s–%s]", ms(m), ms(minOf(xs)), ms(maxOf(xs)))
			if base > 0 && c != reaperCgroup {
				fmt.Printf(" %.2f×", m/base)
			}
			fmt.Print(" |")
		}
		fmt.Println()
	}
	fmt.Println()
}

func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	m := xs[0]
	for _, x := range xs {
		m = min(m, x)
	}
	return m
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
