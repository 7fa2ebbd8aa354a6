//go:build linux

package reap

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// The test binary doubles as a nursery: run with nurseryEnv=1, it becomes a
// child subreaper, runs its arguments as its child, and reaps every process
// that ends up its child until none is left. Orphans of a test lineage thus
// reparent to it rather than to init (which, on some machines, never reaps
// them), and the nursery exits once the whole lineage is gone. It is not a
// member: the lineage is its descendants.
const nurseryEnv = "LINEAGE_REAP_TEST_NURSERY"

func TestMain(m *testing.M) {
	if os.Getenv(nurseryEnv) == "1" {
		os.Exit(nursery(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func nursery(argv []string) int {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		fmt.Fprintln(os.Stderr, "nursery: subreaper:", err)
		return 2
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, "nursery:", err)
		return 2
	}
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, nurseryEnv+"=") })
	files := []uintptr{0, 1, 2}
	if _, err := unix.FcntlInt(3, unix.F_GETFD, 0); err == nil {
		files = append(files, 3) // the hold pipe, for members to block on
	}
	if _, err := syscall.ForkExec(path, argv, &syscall.ProcAttr{Env: env, Files: files}); err != nil {
		fmt.Fprintln(os.Stderr, "nursery:", err)
		return 2
	}
	for {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, syscall.ECHILD) {
			return 0
		}
	}
}

// pstat is what the tests read of /proc/PID/stat, by their own parser so
// that they don't rely on the code under test.
type pstat struct {
	id    lineage.Identity
	ppid  int
	pgrp  int
	state string
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
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return pstat{id: lineage.Identity{PID: uint32(pid), StartTicks: start}, ppid: ppid, pgrp: pgrp, state: f[0]}, true
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

// running reports whether id is alive and not a zombie.
func running(id lineage.Identity) bool {
	st, ok := readStat(int(id.PID))
	return ok && st.id == id && st.state != "Z" && st.state != "X"
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
	l := &lab{t: t, started: make(map[lineage.Identity]string)}
	t.Cleanup(func() {
		for _, id := range l.leaks() {
			t.Errorf("leaked process %s (%s)", id, l.started[id])
			killIdentity(id)
		}
	})
	own := exec.Command("sleep", "60")
	own.Env = os.Environ()
	own.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	peer := exec.Command("sleep", "60") // in the test's process group
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

// job is a lineage the test started: sh -c SCRIPT under a nursery, in a
// process group of its own. It is a Source: its members are the nursery's
// descendants, found by parent pid in /proc, and every identity once seen
// stays a member while it lives. The members may block reading fd 3, which
// reaches EOF when the test ends.
type job struct {
	l       *lab
	cmd     *exec.Cmd
	nursery lineage.Identity
	hold    *os.File
	stderr  syncBuffer

	mu     sync.Mutex
	known  map[lineage.Identity]bool
	order  []lineage.Identity
	extra  []lineage.Member // listed, wrongly, as members
	listed int
}

// start starts script and returns once it has printed a line ("ready").
func (l *lab) start(script string) *job {
	l.t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		l.t.Fatal(err)
	}
	j := &job{l: l, hold: w, known: make(map[lineage.Identity]bool)}
	cmd := exec.Command(os.Args[0], "sh", "-c", script)
	j.cmd = cmd
	cmd.Env = append(os.Environ(), nurseryEnv+"=1")
	cmd.ExtraFiles = []*os.File{r}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stderr = &j.stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		l.t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		l.t.Fatalf("start nursery: %v", err)
	}
	r.Close()
	j.nursery = identityOf(l.t, cmd.Process.Pid)
	l.record(j.nursery, "nursery")
	l.t.Cleanup(j.stop)
	ready := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(out).ReadString('\n')
		ready <- err
	}()
	select {
	case err := <-ready:
		if err != nil {
			l.t.Fatalf("job did not get ready: %v", err)
		}
	case <-time.After(60 * time.Second):
		l.t.Fatalf("job did not get ready in 60s")
	}
	return j
}

// Members lists the live members, as a Source must.
func (j *job) Members() ([]lineage.Member, error) {
	procs := scanProc()
	j.mu.Lock()
	defer j.mu.Unlock()
	j.listed++
	j.discover(procs)
	var out []lineage.Member
	for _, id := range j.order {
		if st, ok := procs[int(id.PID)]; ok && st.id == id {
			out = append(out, lineage.Member{Identity: id, Root: j.nursery})
		}
	}
	for _, m := range j.extra {
		if !slices.ContainsFunc(out, func(o lineage.Member) bool { return o.Identity == m.Identity }) {
			out = append(out, m)
		}
	}
	return out, nil
}

// discover adds the descendants of the nursery and of known members.
func (j *job) discover(procs map[int]pstat) {
	children := make(map[int][]int)
	for pid, st := range procs {
		children[st.ppid] = append(children[st.ppid], pid)
	}
	var queue []int
	if st, ok := procs[int(j.nursery.PID)]; ok && st.id == j.nursery {
		queue = append(queue, int(j.nursery.PID))
	}
	for id := range j.known {
		if st, ok := procs[int(id.PID)]; ok && st.id == id {
			queue = append(queue, int(id.PID))
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
		for _, c := range children[pid] {
			id := procs[c].id
			if !j.known[id] {
				j.known[id] = true
				j.order = append(j.order, id)
				j.l.record(id, "member")
			}
			queue = append(queue, c)
		}
	}
}

// all returns every member identity the job has ever listed.
func (j *job) all() []lineage.Identity {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := slices.Clone(j.order)
	for _, m := range j.extra {
		out = append(out, m.Identity)
	}
	return out
}

// find waits until a live member runs argv, and returns all that do.
func (j *job) find(argv ...string) []lineage.Identity {
	j.l.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if _, err := j.Members(); err != nil {
			j.l.t.Fatal(err)
		}
		var out []lineage.Identity
		for _, id := range j.all() {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(int(id.PID)) + "/cmdline")
			if err == nil && running(id) && slices.Equal(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), argv) {
				out = append(out, id)
			}
		}
		if len(out) > 0 {
			return out
		}
		if time.Now().After(deadline) {
			j.l.t.Fatalf("no member runs %q", argv)
		}
	}
}

// stop kills whatever is left of the job, by identity through pidfds, and
// waits for the nursery, which exits once it has no child left.
func (j *job) stop() {
	j.hold.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		procs := scanProc()
		j.mu.Lock()
		j.discover(procs)
		var left []lineage.Identity
		for _, id := range j.order {
			if st, ok := procs[int(id.PID)]; ok && st.id == id && st.state != "Z" {
				left = append(left, id)
			}
		}
		j.mu.Unlock()
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			j.l.t.Errorf("could not end %d processes of the job: %v", len(left), left)
			break
		}
		for _, id := range left {
			killIdentity(id)
		}
		time.Sleep(5 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { done <- j.cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		j.l.t.Errorf("nursery %s did not exit", j.nursery)
		_ = j.cmd.Process.Kill()
		<-done
	}
	if j.l.t.Failed() && j.stderr.Len() > 0 {
		j.l.t.Logf("job stderr:\n%s", j.stderr.String())
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Len()
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
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

func (r *recorder) Open(pid int) (Pin, error) {
	p, err := r.Signaler.Open(pid)
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
		if o.Result != Kept && o.Result != Refused && running(id) {
			t.Errorf("member %s (%v, %s) still runs", id, o.Argv, o.Result)
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
