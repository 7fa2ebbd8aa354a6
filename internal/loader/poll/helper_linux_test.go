package poll

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/internal/supervise"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// The proc backend's scenarios run in a child process, the test binary
// re-executed with procHelperEnv naming the scenario: the subreaper bit and
// the orphans it brings stay out of the test process. The child supervises
// as lineage run does (supervise makes it the subreaper and reaps its
// children, and tells the backend their statuses) and prints what it saw,
// one line each, for the test to check.
const procHelperEnv = "LINEAGE_PROC_TEST_HELPER"

func init() {
	if name := os.Getenv(procHelperEnv); name != "" {
		os.Exit(runProcHelper(name, os.Args[len(os.Args)-1]))
	}
}

// The escapes a leaky job tries, each a sleeper with its own argument.
var procEscapes = []struct{ name, script string }{
	{"background", `sleep %s &`},
	{"setsid", `setsid sleep %s &`},
	{"nohup", `nohup sleep %s >/dev/null 2>&1 &`},
	// The classic daemon: fork, setsid, fork again, the middle one exits.
	{"double-fork", `(setsid sh -c 'sleep %s </dev/null >/dev/null 2>&1 &' &)`},
}

func procEscapeArg(sleep string, i int) string { return fmt.Sprintf("%s%d", sleep, i+1) }

func runProcHelper(name, sleep string) int {
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, format+"\n", args...)
		out.Flush()
	}
	var err error
	switch name {
	case "escapes":
		err = helpEscapes(say, sleep, false)
	case "escapes-unprivileged":
		err = helpUnprivileged(say)
		if err == nil {
			err = helpEscapes(say, sleep, false)
		}
	case "no-subreaper":
		err = helpEscapes(say, sleep, true)
	case "ambiguous", "forget":
		err = helpOrphans(say, sleep, name)
	default:
		err = fmt.Errorf("unknown helper %q", name)
	}
	if err != nil {
		say("error %v", err)
		return 1
	}
	say("done")
	return 0
}

// openers opens the backends as lineage's trackers do, the poller with
// opts.
func openers(opts *Options) loader.Openers {
	return loader.Openers{
		BPF:       func() (loader.Backend, error) { return bpf.Open(nil) },
		Proc:      func() (loader.Backend, error) { return Open(opts) },
		CheckProc: opts.Validate,
	}
}

// helpUnprivileged reports the backend choice of an unprivileged process.
func helpUnprivileged(say func(string, ...any)) error {
	say("uid %d euid %d", os.Getuid(), os.Geteuid())
	if _, err := bpf.Open(nil); !errors.Is(err, loader.ErrUnavailable) {
		return fmt.Errorf("open bpf unprivileged: %v, want ErrUnavailable", err)
	}
	if _, _, err := loader.Open("bpf", openers(nil)); !errors.Is(err, loader.ErrUnavailable) {
		return fmt.Errorf("open bpf: %v, want ErrUnavailable", err)
	}
	b, choice, err := loader.Open("auto", openers(nil))
	if err != nil {
		return err
	}
	b.Close()
	say("choice %s %s", choice.Backend, choice.Reason)
	return nil
}

// helpEscapes spawns a leaky job under the proc backend, waits for the job
// to exit, reports which of its sleepers are members, then kills them (by
// identity) and reports their exits. With noSubreaper, the job double-forks
// after the first poll; the sleeper is expected to escape, and is killed all
// the same.
func helpEscapes(say func(string, ...any), sleep string, noSubreaper bool) error {
	var sv *supervisor
	opts := &Options{}
	script := ""
	want := map[string]string{} // sleep argument → escape
	if noSubreaper {
		opts = &Options{Interval: time.Minute}
		arg := procEscapeArg(sleep, 3)
		script = fmt.Sprintf("sleep 0.5\n"+procEscapes[3].script+"\nsleep 0.3\n", arg)
		want[arg] = procEscapes[3].name
	} else {
		for i, e := range procEscapes {
			arg := procEscapeArg(sleep, i)
			script += fmt.Sprintf(e.script, arg) + "\n"
			want[arg] = e.name
		}
		var err error
		if sv, err = startSupervising(opts); err != nil {
			return err
		}
		defer sv.children.Close()
	}
	p, err := Open(opts)
	if err != nil {
		return err
	}
	defer p.Close()
	var (
		mu     sync.Mutex
		events []lineage.Event
	)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() {
		ran <- p.Run(ctx, func(ev lineage.Event) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		})
	}()

	// Output to /dev/null, not a pipe: the sleepers would keep a pipe open
	// and Wait would wait for them.
	cmd := exec.Command("sh", "-c", script+"echo started")
	root, err := sv.spawn(p, cmd)
	if err != nil {
		cancel()
		return err
	}
	say("root %d %d", root.PID, root.StartTicks)
	if err := sv.wait(cmd, root); err != nil {
		cancel()
		return err
	}

	// Every sleeper the job left, found by its argument, member or not.
	var sleepers map[string]testutil.Proc
	testutil.Until(10*time.Second, func() bool {
		sleepers = map[string]testutil.Proc{}
		for _, pr := range testutil.Find(sleep) {
			if len(pr.Argv) == 2 && pr.Argv[0] == "sleep" && want[pr.Argv[1]] != "" {
				sleepers[pr.Argv[1]] = pr
			}
		}
		return len(sleepers) == len(want)
	})
	for _, pr := range sleepers {
		say("sleeper %d %d %s", pr.PID, pr.StartTicks, want[pr.Argv[1]])
	}
	ms, err := p.Members(root)
	if err != nil {
		cancel()
		return err
	}
	members := map[lineage.Identity]bool{}
	for _, m := range ms {
		members[m.Identity] = true
		say("member %d %d %s", m.PID, m.StartTicks, strings.Join(m.Argv, " "))
	}
	for _, pr := range sleepers {
		if !members[lineage.Identity{PID: uint32(pr.PID), StartTicks: pr.StartTicks}] {
			say("escaped %d %d %s", pr.PID, pr.StartTicks, want[pr.Argv[1]])
		}
	}

	// Reap: kill by identity, and let the supervisor reap the zombies it
	// inherited, until the lineage is empty.
	for _, pr := range sleepers {
		testutil.KillIdentity(pr.PID, pr.StartTicks)
	}
	var left []lineage.Member
	var listErr error
	empty := testutil.Until(10*time.Second, func() bool {
		left, listErr = p.Members(root)
		return listErr != nil || len(left) == 0
	})
	cancel()
	switch {
	case listErr != nil:
		return listErr
	case !empty:
		return fmt.Errorf("members left after kill: %v", left)
	}
	if err := <-ran; err != nil {
		return err
	}
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range events {
		line := fmt.Sprintf("event %s %d %d", ev.Kind, ev.Process.PID, ev.Process.StartTicks)
		switch ev.Kind {
		case lineage.EventExec:
			line += " " + strings.Join(ev.Argv, " ")
		case lineage.EventExit:
			line += " " + strings.ReplaceAll(ev.Status.String(), " ", "-")
		case lineage.EventFork:
			if ev.Untracked {
				line += " untracked"
			}
		}
		say("%s", line)
	}
	return nil
}

// helpOrphans leaves orphans that are no one's members and checks that the
// supervisor still reaps their zombies. "ambiguous": two spawned roots each leave
// a daemon, double-forked after the first poll, in a session of its own that
// no poll saw: neither can be attributed. "forget": a root's daemon is a
// member, then the root is forgotten.
func helpOrphans(say func(string, ...any), sleep, mode string) error {
	opts := &Options{Interval: time.Minute}
	sv, err := startSupervising(opts)
	if err != nil {
		return err
	}
	defer sv.children.Close()
	p, err := Open(opts)
	if err != nil {
		return err
	}
	defer p.Close()
	var (
		mu        sync.Mutex
		untracked []lineage.Identity
	)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go p.Run(ctx, func(ev lineage.Event) {
		if ev.Untracked {
			mu.Lock()
			untracked = append(untracked, ev.Process)
			mu.Unlock()
		}
	})
	n := 2
	if mode == "forget" {
		n = 1
	}
	var roots []lineage.Identity
	var cmds []*exec.Cmd
	for i := range n {
		// Late enough that the polls Spawn asks for are over.
		script := fmt.Sprintf("sleep 1\n"+procEscapes[3].script+"\n", procEscapeArg(sleep, i))
		cmd := exec.Command("sh", "-c", script)
		root, err := sv.spawn(p, cmd)
		if err != nil {
			return err
		}
		say("root %d %d", root.PID, root.StartTicks)
		roots, cmds = append(roots, root), append(cmds, cmd)
	}
	for i, cmd := range cmds {
		if err := sv.wait(cmd, roots[i]); err != nil {
			return err
		}
	}
	var daemons []testutil.Proc
	if !testutil.Until(10*time.Second, func() bool {
		daemons = daemons[:0]
		for _, pr := range testutil.Find(sleep) {
			if pr.Argv[0] == "sleep" {
				daemons = append(daemons, pr)
			}
		}
		return len(daemons) >= n
	}) {
		return fmt.Errorf("%d of %d daemons found", len(daemons), n)
	}
	members := map[lineage.Identity]bool{}
	for _, root := range roots {
		ms, err := p.Members(root)
		if err != nil {
			return err
		}
		for _, m := range ms {
			members[m.Identity] = true
		}
	}
	for _, d := range daemons {
		id := lineage.Identity{PID: uint32(d.PID), StartTicks: d.StartTicks}
		say("sleeper %d %d daemon", d.PID, d.StartTicks)
		if members[id] {
			say("member %d %d", d.PID, d.StartTicks)
		} else {
			say("escaped %d %d daemon", d.PID, d.StartTicks)
		}
	}
	if mode == "forget" {
		if err := p.Forget(roots[0]); err != nil {
			return err
		}
		say("forgot %d %d", roots[0].PID, roots[0].StartTicks)
	}
	// Run delivers events on its own goroutine: give the untracked events
	// of the escaped daemons a moment to arrive.
	seen := func() bool {
		mu.Lock()
		defer mu.Unlock()
		got := map[lineage.Identity]bool{}
		for _, id := range untracked {
			got[id] = true
		}
		for _, d := range daemons {
			id := lineage.Identity{PID: uint32(d.PID), StartTicks: d.StartTicks}
			if !members[id] && !got[id] {
				return false
			}
		}
		return true
	}
	testutil.Until(5*time.Second, seen)
	mu.Lock()
	for _, id := range untracked {
		say("untracked %d %d", id.PID, id.StartTicks)
	}
	mu.Unlock()
	// Kill them; their zombies are ours, and the supervisor must reap them.
	for _, d := range daemons {
		testutil.KillIdentity(d.PID, d.StartTicks)
	}
	for _, d := range daemons {
		var err error
		reaped := testutil.Until(10*time.Second, func() bool {
			if _, err = p.Members(roots[0]); err != nil {
				return true
			}
			start, _, serr := testutil.StartTicks(d.PID)
			return serr != nil || start != d.StartTicks
		})
		switch {
		case err != nil:
			return err
		case !reaped:
			return fmt.Errorf("daemon %d was never reaped", d.PID)
		}
		say("reaped %d %d", d.PID, d.StartTicks)
	}
	return nil
}

// supervisor is what a helper needs of lineage run's supervision: with it,
// the helper is a child subreaper and supervise reaps its children; nil, it
// waits for its children itself.
type supervisor struct {
	children *supervise.Children
	exits    map[lineage.Identity]<-chan lineage.ExitStatus
}

// startSupervising makes this process a subreaper that reaps its children,
// and hands the reaper to the proc backend opts is for.
func startSupervising(opts *Options) (*supervisor, error) {
	if err := supervise.BecomeSubreaper(); err != nil {
		return nil, err
	}
	sv := &supervisor{children: supervise.WatchChildren(), exits: map[lineage.Identity]<-chan lineage.ExitStatus{}}
	opts.Reaper = sv.children
	return sv, nil
}

// spawn starts cmd as a root, as lineage run does: a job that exits at once
// stays a zombie, and so visible, until it is registered.
func (sv *supervisor) spawn(p *Poller, cmd *exec.Cmd) (lineage.Identity, error) {
	if sv == nil {
		return p.Spawn(cmd, loader.RootOptions{})
	}
	release := sv.children.Hold()
	root, err := p.Spawn(cmd, loader.RootOptions{})
	release()
	if err == nil {
		sv.exits[root] = sv.children.Wait(int(root.PID))
	}
	return root, err
}

// wait waits for the job to exit 0.
func (sv *supervisor) wait(cmd *exec.Cmd, root lineage.Identity) error {
	if sv == nil {
		if err := cmd.Wait(); err != nil {
			return fmt.Errorf("job: %w", err)
		}
		return nil
	}
	if st := <-sv.exits[root]; st != 0 {
		return fmt.Errorf("job: %s", st)
	}
	return nil
}

// procHelperRun is the parsed output of a helper.
type procHelperRun struct {
	lines    []string
	root     lineage.Identity
	sleepers map[string]lineage.Identity // escape → identity
	members  map[lineage.Identity]bool
	escaped  map[string]bool
	// by identity, for the orphan scenarios
	escapedIDs, untracked, reaped map[lineage.Identity]bool
	exits                         map[lineage.Identity]string
	execs                         map[lineage.Identity]string
}

// runProcHelperCmd runs the named helper to completion, as uid (65534) when
// unprivileged is set and this process may change its uid, and returns what
// it printed. Every process the helper reports is gone, or the test fails;
// the helper itself is killed through its handle if it overstays.
func runProcHelperCmd(t *testing.T, name, sleep string, unprivileged bool) procHelperRun {
	t.Helper()
	bin := os.Args[0]
	cmd := exec.Command(bin, "-test.run=^$", sleep)
	if unprivileged && os.Geteuid() == 0 {
		bin = copyForNobody(t)
		cmd = exec.Command(bin, "-test.run=^$", sleep)
		cmd.Dir = filepath.Dir(bin)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	}
	cmd.Env = append(os.Environ(), procHelperEnv+"="+name)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	helper, _, _ := testutil.StartTicks(cmd.Process.Pid)
	var waitErr error
	exited := make(chan struct{})
	t.Cleanup(func() {
		_ = cmd.Process.Kill() // through its pidfd; a no-op once it was waited for
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			t.Errorf("helper %d did not end", cmd.Process.Pid)
		}
	})
	lines := make(chan string, 1<<16)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		waitErr = cmd.Wait()
		close(exited)
	}()
	run := procHelperRun{
		sleepers:   map[string]lineage.Identity{},
		members:    map[lineage.Identity]bool{},
		escaped:    map[string]bool{},
		exits:      map[lineage.Identity]string{},
		execs:      map[lineage.Identity]string{},
		escapedIDs: map[lineage.Identity]bool{},
		untracked:  map[lineage.Identity]bool{},
		reaped:     map[lineage.Identity]bool{},
	}
	timeout := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case line, ok := <-lines:
			if !ok {
				done = true
				break
			}
			run.lines = append(run.lines, line)
			run.parse(line)
		case <-timeout:
			t.Fatalf("helper %s timed out; it said:\n%s", name, strings.Join(run.lines, "\n"))
		}
	}
	<-exited
	if waitErr != nil {
		t.Fatalf("helper %s: %v\nstdout:\n%s\nstderr:\n%s", name, waitErr, strings.Join(run.lines, "\n"), stderr.String())
	}
	// Everything the helper started is gone.
	if !testutil.WaitGone(cmd.Process.Pid, helper, 30*time.Second) {
		t.Errorf("helper %d still alive", cmd.Process.Pid)
	}
	for what, id := range run.sleepers {
		if !testutil.WaitGone(int(id.PID), id.StartTicks, 30*time.Second) {
			t.Errorf("%s sleeper %s still alive", what, id)
		}
	}
	if !testutil.WaitGone(int(run.root.PID), run.root.StartTicks, 30*time.Second) {
		t.Errorf("root %s still alive", run.root)
	}
	return run
}

func (r *procHelperRun) parse(line string) {
	f := strings.Fields(line)
	if len(f) < 3 {
		return
	}
	id := lineage.Identity{PID: uint32(atoiProc(f[1])), StartTicks: uint64(atoiProc(f[2]))}
	switch f[0] {
	case "root":
		r.root = id
	case "sleeper":
		if f[3] == "daemon" {
			r.sleepers[id.String()] = id
		} else {
			r.sleepers[f[3]] = id
		}
	case "untracked":
		r.untracked[id] = true
	case "reaped":
		r.reaped[id] = true
	case "member":
		r.members[id] = true
	case "escaped":
		r.escaped[f[3]] = true
		r.escapedIDs[id] = true
	case "event":
		id = lineage.Identity{PID: uint32(atoiProc(f[2])), StartTicks: uint64(atoiProc(f[3]))}
		rest := strings.Join(f[4:], " ")
		switch f[1] {
		case "exit":
			r.exits[id] = rest
		case "exec":
			r.execs[id] = rest
		}
	}
}

func atoiProc(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// copyForNobody copies the test binary where uid 65534 may run it.
func copyForNobody(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "lineage-proc-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	path := filepath.Join(dir, "loader.test")
	dst, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}
