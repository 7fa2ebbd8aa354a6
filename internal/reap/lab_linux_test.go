//go:build linux

package reap

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// The test binary doubles as a nursery: run with nurseryEnv=1, it becomes a
// child subreaper and, for each line it reads (a quoted shell script), starts
// sh -c SCRIPT in a process group of its own and prints its pid. It reaps
// every process that ends up its child, so that orphans of a test lineage
// reparent to it rather than to init (which, on some machines, never reaps
// them). It dies with the test binary. One nursery serves all the tests: the
// race detector makes the test binary slow to start.
const nurseryEnv = "LINEAGE_REAP_TEST_NURSERY"

// leaderExitEnv makes the test binary a process whose leader thread exits
// while another thread runs on for a minute: /proc shows it as state Z, yet
// it lives.
const leaderExitEnv = "LINEAGE_REAP_TEST_LEADER_EXIT"

func TestMain(m *testing.M) {
	if os.Getenv(nurseryEnv) == "1" {
		os.Exit(runNursery())
	}
	if os.Getenv(leaderExitEnv) == "1" {
		leaderExit()
	}
	code := m.Run()
	theNursery.close()
	os.Exit(code)
}

func runNursery() int {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "nursery: subreaper:", err)
		return 2
	}
	if err := unix.Prctl(unix.PR_SET_PDEATHSIG, uintptr(unix.SIGKILL), 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "nursery: death signal:", err)
		return 2
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		fmt.Fprintln(os.Stderr, "nursery:", err)
		return 2
	}
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nursery:", err)
		return 2
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, nurseryEnv+"=") })
	chld := make(chan os.Signal, 1)
	signal.Notify(chld, syscall.SIGCHLD)
	go func() {
		for range chld {
			for {
				var ws syscall.WaitStatus
				if pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil); pid <= 0 || err != nil {
					break
				}
			}
		}
	}()
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(nil, 1<<20)
	for in.Scan() {
		script, err := strconv.Unquote(in.Text())
		if err != nil {
			fmt.Fprintln(os.Stderr, "nursery:", err)
			return 2
		}
		pid, err := syscall.ForkExec(sh, []string{"sh", "-c", script}, &syscall.ProcAttr{
			Env:   env,
			Files: []uintptr{devnull.Fd(), devnull.Fd(), devnull.Fd()},
			Sys:   &syscall.SysProcAttr{Setpgid: true},
		})
		if err != nil {
			pid = -1
		}
		fmt.Println(pid)
	}
	return 0
}

func leaderExit() {
	go func() {
		time.Sleep(time.Minute)
		os.Exit(0)
	}()
	// The main goroutine runs on the leader thread until it unlocks; exit
	// that thread alone (exit, not exit_group).
	runtime.LockOSThread()
	fmt.Println("ready")
	for {
		syscall.RawSyscall(syscall.SYS_EXIT, 0, 0, 0)
	}
}

// theNursery is the one nursery of this test binary, started on first use.
var theNursery nurseryProc

type nurseryProc struct {
	once sync.Once
	err  error
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Reader
	mu   sync.Mutex
	id   lineage.Identity
}

// spawn starts sh -c script under the nursery and returns its pid.
func (n *nurseryProc) spawn(script string) (int, error) {
	n.once.Do(func() {
		n.cmd = exec.Command(os.Args[0])
		n.cmd.Env = append(os.Environ(), nurseryEnv+"=1")
		n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		n.cmd.Stderr = os.Stderr
		if n.in, n.err = n.cmd.StdinPipe(); n.err != nil {
			return
		}
		out, err := n.cmd.StdoutPipe()
		if n.err = err; err != nil {
			return
		}
		n.out = bufio.NewReader(out)
		if n.err = n.cmd.Start(); n.err == nil {
			st, _ := readStat(n.cmd.Process.Pid)
			n.id = st.id
		}
	})
	if n.err != nil {
		return 0, fmt.Errorf("start nursery: %w", n.err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if _, err := fmt.Fprintln(n.in, strconv.Quote(script)); err != nil {
		return 0, fmt.Errorf("ask nursery: %w", err)
	}
	line, err := n.out.ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("hear nursery: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("nursery could not start sh (%q)", line)
	}
	return pid, nil
}

func (n *nurseryProc) close() {
	if n.cmd != nil && n.cmd.Process != nil {
		n.in.Close()
		_ = n.cmd.Wait()
	}
}

// pstat is what the tests read of /proc/PID/stat, by their own parser so
// that they don't rely on the code under test.
type pstat struct {
	id      lineage.Identity
	ppid    int
	pgrp    int
	state   string
	threads int
}

func readStat(pid int) (pstat, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return pstat{}, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 > len(b) {
		return pstat{}, false
	}
	f := strings.Fields(string(b[i+2:]))
	if len(f) < 20 {
		return pstat{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	threads, _ := strconv.Atoi(f[17])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return pstat{id: lineage.Identity{PID: uint32(pid), StartTicks: start}, ppid: ppid, pgrp: pgrp, state: f[0], threads: threads}, true
}

// scanProc reads every process in /proc.
func scanProc() map[int]pstat {
	ents, _ := os.ReadDir("/proc")
	out := make(map[int]pstat, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := readStat(pid); ok {
			out[pid] = st
		}
	}
	return out
}

// running reports whether id is alive: not a zombie (a leader thread in
// state Z whose other threads run on is alive).
func running(id lineage.Identity) bool {
	st, ok := readStat(int(id.PID))
	return ok && st.id == id && (st.threads > 1 || st.state != "Z" && st.state != "X")
}

func identityOf(t testing.TB, pid int) lineage.Identity {
	t.Helper()
	st, ok := readStat(pid)
	if !ok {
		t.Fatalf("pid %d: no such process", pid)
	}
	return st.id
}

// killIdentity is the tests' own kill: pin, check the start time, SIGKILL.
func killIdentity(id lineage.Identity) {
	fd, err := unix.PidfdOpen(int(id.PID), 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if st, ok := readStat(int(id.PID)); ok && st.id == id {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}
}

// lab is one test's process world: it records every process the test starts
// and, when the test ends, checks that each one is gone.
type lab struct {
	t          testing.TB
	mu         sync.Mutex
	started    map[lineage.Identity]string
	bystanders []lineage.Identity
}

// newLab returns a lab with two bystanders started beside the lineages: one
// with the same environment in a process group of its own, and one in the
// test's own process group. Both must survive the test.
func newLab(t testing.TB) *lab {
	l := newBareLab(t)
	// They must outlive any test, and still end on their own.
	own := exec.Command("sleep", "300")
	own.Env = os.Environ()
	own.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	peer := exec.Command("sleep", "300") // in the test's process group
	for _, c := range []*exec.Cmd{own, peer} {
		if err := c.Start(); err != nil {
			t.Fatalf("start bystander: %v", err)
		}
		t.Cleanup(func() {
			_ = c.Process.Kill()
			_ = c.Wait()
		})
		id := identityOf(t, c.Process.Pid)
		l.record(id, "bystander")
		l.bystanders = append(l.bystanders, id)
	}
	t.Cleanup(func() {
		for _, id := range l.bystanders {
			st, ok := readStat(int(id.PID))
			if !ok || st.id != id || st.state == "Z" || st.state == "T" {
				t.Errorf("bystander %s was harmed (state %q)", id, st.state)
			}
		}
	})
	return l
}

// newBareLab returns a lab without bystanders.
func newBareLab(t testing.TB) *lab {
	l := &lab{t: t, started: make(map[lineage.Identity]string)}
	t.Cleanup(func() {
		for _, id := range l.leaks() {
			t.Errorf("leaked process %s (%s)", id, l.started[id])
			killIdentity(id)
		}
	})
	return l
}

// peer returns the bystander in the test's own process group.
func (l *lab) peer() lineage.Identity { return l.bystanders[1] }

func (l *lab) record(id lineage.Identity, what string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.started[id]; !ok {
		l.started[id] = what
	}
}

// leaks returns the processes the test started that still run.
func (l *lab) leaks() []lineage.Identity {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []lineage.Identity
	for id := range l.started {
		if running(id) {
			out = append(out, id)
		}
	}
	return out
}

// job is a lineage the test started: sh -c SCRIPT, started by the nursery
// in a process group of its own. It is a Source: its members are the shell
// and its descendants, found by parent pid in /proc, and its orphans (the
// nursery's children in its process group); every identity once seen stays
// a member while it lives. The script's stdout and fd 3 are FIFOs of the
// test's: the members may block reading fd 3, which reaches EOF when the test
// ends. Its stderr goes to a file, shown when the test fails.
type job struct {
	l    *lab
	root lineage.Identity
	hold *os.File // the only writer of fd 3
	out  *os.File // a reader of the script's stdout
	dir  string

	mu       sync.Mutex
	known    map[lineage.Identity]bool
	order    []lineage.Identity
	extra    []lineage.Member // listed, wrongly, as members
	listed   int
	returned map[lineage.Identity]bool
}

// start starts script and returns once it has printed a line ("ready").
func (l *lab) start(script string) *job {
	l.t.Helper()
	dir := l.t.TempDir()
	hold, ready := filepath.Join(dir, "hold"), filepath.Join(dir, "ready")
	for _, p := range []string{hold, ready} {
		if err := unix.Mkfifo(p, 0o600); err != nil {
			l.t.Fatal(err)
		}
	}
	// Read-write opens of a FIFO don't wait for the other side.
	w, err := os.OpenFile(hold, os.O_RDWR, 0)
	if err != nil {
		l.t.Fatal(err)
	}
	r, err := os.OpenFile(ready, os.O_RDWR, 0)
	if err != nil {
		l.t.Fatal(err)
	}
	j := &job{l: l, hold: w, out: r, dir: dir, known: make(map[lineage.Identity]bool), returned: make(map[lineage.Identity]bool)}
	pid, err := theNursery.spawn(fmt.Sprintf("exec 3<%s >%s 2>%s\n%s",
		shellQuote(hold), shellQuote(ready), shellQuote(filepath.Join(dir, "stderr")), script))
	if err != nil {
		l.t.Fatal(err)
	}
	j.root = lineage.Identity{PID: uint32(pid)}
	if st, ok := readStat(pid); ok {
		j.root = st.id
	}
	l.record(j.root, "job")
	j.known[j.root] = true
	j.order = append(j.order, j.root)
	l.t.Cleanup(j.stop)
	got := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(r).ReadString('\n')
		got <- err
	}()
	select {
	case err := <-got:
		if err != nil {
			l.t.Fatalf("job did not get ready: %v", err)
		}
	case <-time.After(60 * time.Second):
		l.t.Fatalf("job did not get ready in 60s")
	}
	return j
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Members lists the live members, as a Source must, and remembers what it
// returned.
func (j *job) Members() ([]lineage.Member, error) {
	ms := j.members()
	j.mu.Lock()
	defer j.mu.Unlock()
	j.listed++
	for _, m := range ms {
		j.returned[m.Identity] = true
	}
	return ms, nil
}

// members lists the live members without counting it as a Source call.
func (j *job) members() []lineage.Member {
	procs := scanProc()
	j.mu.Lock()
	defer j.mu.Unlock()
	j.discover(procs)
	var out []lineage.Member
	for _, id := range j.order {
		if st, ok := procs[int(id.PID)]; ok && st.id == id {
			out = append(out, lineage.Member{Identity: id, Root: j.root})
		}
	}
	for _, m := range j.extra {
		if !slices.ContainsFunc(out, func(o lineage.Member) bool { return o.Identity == m.Identity }) {
			out = append(out, m)
		}
	}
	return out
}

// discover adds the descendants of known members, and the job's orphans.
func (j *job) discover(procs map[int]pstat) {
	children := make(map[int][]int)
	for pid, st := range procs {
		children[st.ppid] = append(children[st.ppid], pid)
	}
	var queue []int
	for id := range j.known {
		if st, ok := procs[int(id.PID)]; ok && st.id == id {
			queue = append(queue, int(id.PID))
		}
	}
	for _, pid := range children[int(theNursery.id.PID)] {
		if procs[pid].pgrp == int(j.root.PID) {
			queue = append(queue, pid)
		}
	}
	seen := make(map[int]bool)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if seen[pid] {
			continue
		}
		seen[pid] = true
		if id := procs[pid].id; !j.known[id] {
			j.known[id] = true
			j.order = append(j.order, id)
			j.l.record(id, "member")
		}
		queue = append(queue, children[pid]...)
	}
}

// all returns every identity Members has returned.
func (j *job) all() []lineage.Identity {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []lineage.Identity
	for id := range j.returned {
		out = append(out, id)
	}
	return out
}

// forget forgets what Members has returned so far.
func (j *job) forget() {
	j.mu.Lock()
	defer j.mu.Unlock()
	clear(j.returned)
}

// find waits until a live member runs argv, and returns all that do.
func (j *job) find(argv ...string) []lineage.Identity {
	j.l.t.Helper()
	var out []lineage.Identity
	testutil.Eventually(j.l.t, 10*time.Second, fmt.Sprintf("a member that runs %q", argv), func() bool {
		out = out[:0]
		for _, m := range j.members() {
			id := m.Identity
			b, err := os.ReadFile("/proc/" + strconv.Itoa(int(id.PID)) + "/cmdline")
			if err == nil && running(id) && slices.Equal(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), argv) {
				out = append(out, id)
			}
		}
		return len(out) > 0
	})
	return out
}

// stop kills whatever is left of the job, by identity through pidfds; the
// nursery reaps them.
func (j *job) stop() {
	j.hold.Close()
	defer j.out.Close()
	var left []lineage.Identity
	ended := testutil.Until(20*time.Second, func() bool {
		procs := scanProc()
		j.mu.Lock()
		j.discover(procs)
		left = left[:0]
		for _, id := range j.order {
			if st, ok := procs[int(id.PID)]; ok && st.id == id && (st.threads > 1 || st.state != "Z") {
				left = append(left, id)
			}
		}
		j.mu.Unlock()
		for _, id := range left {
			killIdentity(id)
		}
		return len(left) == 0
	})
	if !ended {
		j.l.t.Errorf("could not end %d processes of the job: %v", len(left), left)
	}
	if j.l.t.Failed() {
		if b, _ := os.ReadFile(filepath.Join(j.dir, "stderr")); len(b) > 0 {
			j.l.t.Logf("job stderr:\n%s", b)
		}
	}
}

// recorder wraps a Signaler and records every signal sent, by pid.
type recorder struct {
	Signaler
	mu   sync.Mutex
	pids map[Pin]int
	sent map[int][]string
}

func newRecorder(s Signaler) *recorder {
	return &recorder{Signaler: s, pids: make(map[Pin]int), sent: make(map[int][]string)}
}

// realSignaler returns the default pidfd Signaler, closed when t ends.
func realSignaler(t testing.TB) *recorder {
	p, err := newPidfds()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return newRecorder(p)
}

func (r *recorder) Open(id lineage.Identity) (Pin, error) {
	pid := int(id.PID)
	p, err := r.Signaler.Open(id)
	if err == nil {
		r.mu.Lock()
		r.pids[p] = pid
		r.mu.Unlock()
	}
	return p, err
}

func (r *recorder) Send(p Pin, sig syscall.Signal) error {
	if sig != 0 {
		r.mu.Lock()
		r.sent[r.pids[p]] = append(r.sent[r.pids[p]], lineage.SignalName(sig))
		r.mu.Unlock()
	}
	return r.Signaler.Send(p, sig)
}

func (r *recorder) sentTo(pid int) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.sent[pid])
}

// checkReport checks what holds after every reap of a job: each member it
// ever listed appears exactly once, no outcome names anything else, nothing
// survived, and every member not kept or refused is dead.
func checkReport(t testing.TB, j *job, rep Report) map[lineage.Identity]Outcome {
	t.Helper()
	byID := make(map[lineage.Identity]Outcome)
	for _, o := range rep.Outcomes {
		if _, dup := byID[o.Member.Identity]; dup {
			t.Errorf("%s appears twice in the report", o.Member.Identity)
		}
		byID[o.Member.Identity] = o
	}
	all := j.all()
	for _, id := range all {
		o, ok := byID[id]
		if !ok {
			t.Errorf("member %s is missing from the report", id)
			continue
		}
		if o.Result != lineage.Kept && o.Result != lineage.Refused && running(id) {
			t.Errorf("member %s (%v, %s) still runs", id, o.Argv, o.Result)
		}
		if ended := o.Result == lineage.Exited || o.Result == lineage.Terminated || o.Result == lineage.Killed; ended != o.Member.Exited {
			t.Errorf("member %s: result %s beside member exited %v", id, o.Result, o.Member.Exited)
		}
		if o.Status != nil && o.Member.Status != *o.Status {
			t.Errorf("member %s: status %v beside member status %v", id, *o.Status, o.Member.Status)
		}
	}
	if len(byID) != len(all) {
		t.Errorf("report has %d outcomes, the source listed %d members", len(byID), len(all))
	}
	if len(rep.Survivors) > 0 {
		t.Errorf("survivors: %v", rep.Survivors)
	}
	if t.Failed() {
		logReport(t, rep)
	}
	return byID
}

func logReport(t testing.TB, rep Report) {
	t.Helper()
	t.Logf("containment %q, %d passes, took %v, phases %+v, warnings %q", rep.Containment, rep.Passes, rep.Took, rep.Phases, rep.Warnings)
	for _, o := range rep.Outcomes {
		t.Logf("  %s %q: %s %q sent=%v status=%v", o.Member.Identity, o.Argv, o.Result, o.Reason, o.Sent, o.Status)
	}
}

// TestLabDetectsLeak checks the leak check itself: a process the test
// started and did not end is reported.
func TestLabDetectsLeak(t *testing.T) {
	l := newLab(t)
	j := l.start("sleep 60 & echo ready; wait")
	sleepers := j.find("sleep", "60")
	if len(sleepers) != 1 {
		t.Fatalf("found %d sleepers, want 1", len(sleepers))
	}
	if leaks := l.leaks(); !slices.Contains(leaks, sleepers[0]) {
		t.Errorf("leaks() = %v, want it to contain the running %s", leaks, sleepers[0])
	}
	j.stop()
	if leaks := l.leaks(); slices.Contains(leaks, sleepers[0]) {
		t.Errorf("leaks() = %v after stop", leaks)
	}
}
