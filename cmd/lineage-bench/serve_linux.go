package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
)

// The sidecar's figures, each against one running `lineage serve` (bpf):
// `lineage exec -- true` over `true`; registering a running process with
// 1,000 descendants (the adoption); a session close of 100 roots with 10
// leftovers each beside the pidfd floor for 1,000; the daemon's RSS idle
// and with many members.

// serveDaemon is a `lineage serve` the benchmark started, in a process
// group of its own, on a socket in a temporary directory.
type serveDaemon struct {
	cmd  *exec.Cmd
	dir  string
	sock string
	c    *client.Client
	bin  string
	pin  string // where its tracker is pinned
}

// startBenchDaemon starts a daemon that keeps its state under $TMPDIR,
// or none when stateless. Its tracker is pinned, as `lineage serve` pins
// by default, in a directory of its own under /sys/fs/bpf, so that two
// daemons (a baseline's beside lineage's) can run at once; stop unpins
// it, so none outlives the benchmark. When cpuProfile is set, the daemon writes its CPU profile
// there (LINEAGE_CPUPROFILE, in its environment alone).
func startBenchDaemon(lineageBin string, stateless bool, cpuProfile string, extra ...string) (*serveDaemon, error) {
	dir, err := tempDir("", "lineage-bench-serve")
	if err != nil {
		return nil, err
	}
	d := &serveDaemon{dir: dir, sock: filepath.Join(dir, "lineage.sock"), bin: lineageBin, pin: filepath.Join("/sys/fs/bpf", filepath.Base(dir))}
	state := filepath.Join(dir, "state")
	if stateless {
		state = ""
	}
	d.cmd = exec.Command(lineageBin, append([]string{"serve", "--backend", "bpf", "--socket", d.sock, "--state-dir", state, "--pin-dir", d.pin}, extra...)...)
	if cpuProfile != "" {
		d.cmd.Env = append(os.Environ(), "LINEAGE_CPUPROFILE="+cpuProfile)
	}
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", d.sock); err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			d.stop()
			return nil, fmt.Errorf("lineage serve did not listen within a minute")
		}
	}
	d.c = client.New(d.sock)
	return d, nil
}

// stop ends the daemon with SIGTERM; the daemon's death kills nothing, so
// every benchmark closes its sessions first.
func (d *serveDaemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
	if d.c != nil {
		d.c.Close()
	}
	if out, err := exec.Command(d.bin, "serve", "--uninstall", "--pin-dir", d.pin).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "lineage-bench: unpin %s: %v: %s\n", d.pin, err, out)
	}
	os.RemoveAll(d.dir)
}

func (d *serveDaemon) do(method, path string, body, out any) error {
	return d.c.Do(context.Background(), method, path, body, out)
}

// rss returns the daemon's resident set size, in bytes.
func (d *serveDaemon) rss() (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", d.cmd.Process.Pid)
}

// lineageExec returns `lineage exec --session S -- argv...` on the daemon.
func (d *serveDaemon) lineageExec(session string, argv ...string) *exec.Cmd {
	cmd := exec.Command(d.bin, append([]string{"exec", "--session", session, "--kind", "autonomous", "--"}, argv...)...)
	cmd.Env = append(os.Environ(), client.EnvSocket+"="+d.sock)
	return cmd
}

// execFigure is `lineage exec -- true` through one daemon: the wall
// times per round, and the daemon's CPU per registration (its utime and
// stime over the rounds, turn ends included), which the load does not
// change as it changes the wall times.
type execFigure struct {
	walls []float64
	cpu   time.Duration
}

// measureExecWall times `true` plain and under `lineage exec` through each
// daemon, interleaved round by round (keyed "true" and by the daemons'
// names); a turn end between rounds forgets the roots that ended.
func measureExecWall(daemons map[string]*serveDaemon, rounds, runs int) (map[string]*execFigure, error) {
	names := slices.Sorted(maps.Keys(daemons))
	out := map[string]*execFigure{"true": {}}
	for _, name := range names {
		out[name] = &execFigure{}
	}
	for r := 0; r < rounds; r++ {
		for _, name := range append([]string{"true"}, names...) {
			d := daemons[name]
			cpu0 := d.cpu()
			start := time.Now()
			for i := 0; i < runs; i++ {
				cmd := exec.Command("true")
				if d != nil {
					cmd = d.lineageExec("bench-exec", "true")
				}
				if msg, err := cmd.CombinedOutput(); err != nil {
					return nil, fmt.Errorf("%s: %v: %s", name, err, msg)
				}
			}
			out[name].walls = append(out[name].walls, float64(time.Since(start))/float64(runs))
			if d == nil {
				continue
			}
			if err := d.do("POST", "/v1/sessions/bench-exec/turn-end", nil, nil); err != nil {
				return nil, err
			}
			out[name].cpu += d.cpu() - cpu0
		}
	}
	for _, name := range names {
		out[name].cpu /= time.Duration(rounds * runs)
		if err := daemons[name].do("POST", "/v1/sessions/bench-exec/close", nil, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// cpu is the CPU time the daemon has used so far (utime and stime, in
// clock ticks of 10 ms); zero for no daemon.
func (d *serveDaemon) cpu() time.Duration {
	if d == nil {
		return 0
	}
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// tree is a shell script whose process has n descendants: n/10-1 sleepers
// under each of 10 shells. It says "ready" once it started them all.
func tree(n int) string {
	per := strconv.Itoa(n/10 - 1)
	return "i=0; while [ $i -lt 10 ]; do sh -c 'j=0; while [ $j -lt " + per +
		" ]; do sleep 600 </dev/null >/dev/null 2>&1 & j=$((j+1)); done; wait' & i=$((i+1)); done; echo ready; wait"
}

// descendants counts the live descendants of pid, from one scan of /proc.
func descendants(pid int) int {
	kids := make(map[int][]int)
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
		if len(f) > 1 && f[0] != "Z" {
			pp, _ := strconv.Atoi(f[1])
			kids[pp] = append(kids[pp], p)
		}
	}
	n := 0
	for todo := kids[pid]; len(todo) > 0; todo = todo[1:] {
		n++
		todo = append(todo, kids[todo[0]]...)
	}
	return n
}

// startTree starts tree(n) as a child and waits until its n descendants
// run.
func startTree(n int) (*exec.Cmd, error) {
	cmd := exec.Command("sh", "-c", tree(n))
	cmd.Stdout = nil
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(2 * time.Minute); descendants(cmd.Process.Pid) < n; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return nil, fmt.Errorf("tree of %d did not start within 2 minutes", n)
		}
	}
	return cmd, nil
}

// measureAdopt times POST /v1/roots of a running process with n
// descendants: the registration and the adoption of all of them.
func measureAdopt(d *serveDaemon, rounds, n int) ([]float64, error) {
	var out []float64
	for r := 0; r < rounds; r++ {
		cmd, err := startTree(n)
		if err != nil {
			return nil, err
		}
		session := fmt.Sprintf("bench-adopt-%d", r)
		var root api.Root
		start := time.Now()
		err = d.do("POST", "/v1/roots", api.AddRoot{PID: int64(cmd.Process.Pid), Session: session}, &root)
		took := time.Since(start)
		if err == nil {
			err = d.do("GET", "/v1/roots/"+root.Root.String(), nil, &root)
		}
		if err == nil && len(root.Members) < n {
			err = fmt.Errorf("adopted %d of %d descendants", len(root.Members)-1, n)
		}
		if cerr := d.do("POST", "/v1/sessions/"+session+"/close", nil, nil); err == nil {
			err = cerr
		}
		_ = cmd.Wait()
		if err != nil {
			return nil, fmt.Errorf("adopt %d: %w", n, err)
		}
		out = append(out, float64(took))
	}
	return out, nil
}

// liveMembers counts the live members of session's roots.
func (d *serveDaemon) liveMembers(session string) (int, []api.Outcome, error) {
	var rep api.Ended
	if err := d.do("GET", "/v1/sessions/"+session+"/report", nil, &rep); err != nil {
		return 0, nil, err
	}
	var all []api.Outcome
	for _, r := range rep.Roots {
		all = append(all, r.Outcomes...)
	}
	return len(all), all, nil
}

// waitMembers waits until session has at least n live members.
func (d *serveDaemon) waitMembers(session string, n int) ([]api.Outcome, error) {
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		got, all, err := d.liveMembers(session)
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusNotFound {
			err = nil // not registered yet
		}
		if err != nil || got >= n {
			return all, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("session %s: %d of %d members", session, got, n)
		}
	}
}

// reapZombies waits for the leftovers that were reparented to this
// process (a child subreaper) and have died.
func reapZombies(live []api.Outcome) {
	for _, o := range live {
		var ws syscall.WaitStatus
		_, _ = syscall.Wait4(int(o.Process.PID), &ws, syscall.WNOHANG, nil)
	}
}

// measureRSS reads the daemon's RSS idle, then with members processes
// tracked in one session (one root's sleepers), and closes that session.
func measureRSS(d *serveDaemon, members int) (idle, busy int64, err error) {
	if idle, err = d.rss(); err != nil {
		return 0, 0, err
	}
	script := "i=0; while [ $i -lt " + strconv.Itoa(members) + " ]; do sleep 600 </dev/null >/dev/null 2>&1 & i=$((i+1)); done; wait"
	cmd := d.lineageExec("bench-rss", "sh", "-c", script)
	if err := cmd.Start(); err != nil {
		return 0, 0, err
	}
	defer func() {
		if err != nil {
			_ = cmd.Process.Kill()
		}
		_ = cmd.Wait()
	}()
	live, err := d.waitMembers("bench-rss", members+1)
	if err == nil {
		busy, err = d.rss()
	}
	if cerr := d.do("POST", "/v1/sessions/bench-rss/close", nil, nil); err == nil {
		err = cerr
	}
	reapZombies(live)
	return idle, busy, err
}

// serveBench sizes the sidecar's benchmarks.
type serveBench struct {
	rounds, execRuns, adopt, closeRoots, closeEach, rssMembers int
	// figures names the figures measured (rss, exec, adopt, close).
	figures string
	// baseline, if set, is another lineage binary (an older build) whose
	// daemon's close is measured in the same rounds.
	baseline string
	// cpuProfile, if set, is where the daemon (not the baseline's) writes
	// its CPU profile.
	cpuProfile string
}

// serveFlags declares the flags that size the sidecar's benchmarks.
func serveFlags() *serveBench {
	var sb serveBench
	flag.IntVar(&sb.rounds, "serve-rounds", 5, "interleaved rounds per sidecar figure")
	flag.IntVar(&sb.execRuns, "exec-runs", 20, "runs per `lineage exec -- true` measurement")
	flag.IntVar(&sb.adopt, "adopt", 1000, "descendants of the process registered by pid")
	flag.IntVar(&sb.closeRoots, "close-roots", 100, "roots of the session closed")
	flag.IntVar(&sb.closeEach, "close-each", 10, "leftovers of each root of the session closed")
	flag.IntVar(&sb.rssMembers, "rss-members", 10000, "members tracked when the daemon's RSS is read")
	flag.StringVar(&sb.figures, "serve-figures", "rss,exec,adopt,close", "the sidecar's figures to measure, comma-separated")
	flag.StringVar(&sb.baseline, "serve-baseline", "", "another lineage binary (an older build) whose daemon's session close is measured in the same rounds")
	flag.StringVar(&sb.cpuProfile, "serve-cpuprofile", "", "write the daemon's CPU profile here (LINEAGE_CPUPROFILE)")
	return &sb
}

func (b serveBench) wants(figure string) bool {
	return slices.Contains(strings.Split(b.figures, ","), figure)
}

// benchServe runs the sidecar's benchmarks against one daemon (and the
// baseline's, for the exec and the close) and prints their tables.
func benchServe(lineageBin string, b serveBench) {
	load := loadAverage()
	d, err := startBenchDaemon(lineageBin, false, b.cpuProfile)
	if err != nil {
		fail(err)
	}
	var base *serveDaemon
	if b.baseline != "" && (b.wants("close") || b.wants("exec")) {
		if base, err = startBenchDaemon(b.baseline, false, ""); err != nil {
			d.stop()
			fail(fmt.Errorf("baseline: %w", err))
		}
	}
	res, err := b.measure(d, base)
	d.stop()
	if base != nil {
		base.stop()
	}
	if err != nil {
		fail(err)
	}
	res.print(b, load)
}

type serveResults struct {
	idle, busy int64
	execs      map[string]*execFigure
	adopt      []float64
	closes     map[string][]float64
}

func (b serveBench) measure(d, base *serveDaemon) (r serveResults, err error) {
	time.Sleep(2 * time.Second)
	if b.wants("rss") {
		if r.idle, r.busy, err = measureRSS(d, b.rssMembers); err != nil {
			return r, fmt.Errorf("rss: %w", err)
		}
	}
	if b.wants("exec") {
		if r.execs, err = measureExecs(d, base, b.rounds, b.execRuns); err != nil {
			return r, fmt.Errorf("exec: %w", err)
		}
	}
	if b.wants("adopt") {
		if r.adopt, err = measureAdopt(d, b.rounds, b.adopt); err != nil {
			return r, fmt.Errorf("adopt: %w", err)
		}
	}
	if b.wants("close") {
		daemons := map[string]*serveDaemon{"close": d}
		if base != nil {
			daemons["baseline"] = base
		}
		if r.closes, err = measureClose(daemons, b.rounds, b.closeRoots, b.closeEach); err != nil {
			return r, fmt.Errorf("close: %w", err)
		}
	}
	return r, nil
}

// measureExecs times `lineage exec -- true` through d, through base if
// set, and through a daemon of d's binary that keeps no state (what the
// state file's write costs each registration), in the same rounds.
func measureExecs(d, base *serveDaemon, rounds, runs int) (map[string]*execFigure, error) {
	stateless, err := startBenchDaemon(d.bin, true, "")
	if err != nil {
		return nil, err
	}
	defer stateless.stop()
	daemons := map[string]*serveDaemon{"lineage": d, "no state": stateless}
	if base != nil {
		daemons["baseline"] = base
	}
	return measureExecWall(daemons, rounds, runs)
}

func (r serveResults) print(b serveBench, load string) {
	adopt, closes, idle, busy := r.adopt, r.closes, r.idle, r.busy
	fmt.Printf("### The sidecar (`lineage serve`, bpf; median of %d interleaved rounds)\n\n", b.rounds)
	fmt.Printf("Load average at the start: %s.\n\n", load)
	fmt.Println("| figure | lineage | baseline | target |")
	fmt.Println("|---|---|---|---|")
	if b.wants("exec") {
		r.printExecs()
	}
	if b.wants("adopt") {
		fmt.Printf("| register a running process with %d descendants (`POST /v1/roots`, adoption included) | %s | | |\n", b.adopt, ms(median(adopt)))
	}
	if b.wants("close") {
		floor, cl := median(closes["floor"]), median(closes["close"])
		fmt.Printf("| close a session of %d roots × %d leftovers | %s (%.2f×) | pidfd floor for %d: %s | ≤ 2× |\n", b.closeRoots, b.closeEach, ms(cl), cl/floor, b.closeRoots*b.closeEach, ms(floor))
		if bl, ok := closes["baseline"]; ok {
			fmt.Printf("| the same, baseline binary (`-serve-baseline`) | %s (%.2f×) | | |\n", ms(median(bl)), median(bl)/floor)
		}
	}
	if b.wants("rss") {
		fmt.Printf("| daemon RSS, idle | %.1f MiB | | |\n", float64(idle)/(1<<20))
		per := float64(busy-idle) / float64(b.rssMembers) * 10000
		fmt.Printf("| daemon RSS with %d members | %.1f MiB (+%.1f MiB per 10,000) | | |\n", b.rssMembers, float64(busy)/(1<<20), per/(1<<20))
	}
	fmt.Println()
}

// printExecs prints the exec rows: each daemon's median over `true`'s, and
// its CPU per registration.
func (r serveResults) printExecs() {
	base := median(r.execs["true"].walls)
	for _, row := range []struct{ name, figure string }{
		{"lineage", "`lineage exec -- true`, over `true`"},
		{"baseline", "the same, baseline binary (`-serve-baseline`)"},
		{"no state", "the same, daemon without a state directory"},
	} {
		f, ok := r.execs[row.name]
		if !ok {
			continue
		}
		ex := median(f.walls)
		fmt.Printf("| %s | +%s (%s; daemon CPU %s a registration) | `true`: %s | ≤ +5 ms |\n", row.figure, ms(ex-base), ms(ex), f.cpu.Round(10*time.Microsecond), ms(base))
	}
}
