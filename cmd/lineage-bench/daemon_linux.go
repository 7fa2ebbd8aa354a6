package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// daemon is a `lineage serve` the benchmark started on a socket of its own.
type daemon struct {
	cmd  *exec.Cmd
	sock string
}

func startDaemon(lineageBin, dir string) (*daemon, error) {
	d := &daemon{sock: filepath.Join(dir, "lineage.sock")}
	d.cmd = exec.Command(lineageBin, "serve", "--backend", "bpf", "--socket", d.sock, "--state-dir", filepath.Join(dir, "state"), "--pin-dir", "none")
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		return nil, err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", d.sock); err == nil {
			c.Close()
			return d, nil
		}
	}
	d.stop()
	return nil, errors.New("lineage serve did not listen within 30s")
}

func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	_ = d.cmd.Wait()
}

// runCommand runs `lineage run` through the daemon at sock, or standalone
// when sock is "".
func runCommand(lineageBin, sock string, argv ...string) *exec.Cmd {
	args := []string{"run", "-q", "--"}
	if sock == "" {
		args = []string{"run", "-q", "--standalone", "--"}
	}
	cmd := exec.Command(lineageBin, append(args, argv...)...)
	cmd.Env = append(os.Environ(), "LINEAGE_SOCKET="+sock)
	return cmd
}

// The cases of the daemon benchmark's wall times.
const (
	viaTrue       = "true"
	viaDaemon     = "lineage run -- true (through the daemon)"
	viaStandalone = "lineage run --standalone -- true"
)

// daemonResult holds single-run wall times and the clients' peak RSS.
type daemonResult struct {
	walls map[string][]float64
	// rss is each client's peak resident set through the daemon, KiB.
	rss []float64
}

// measureDaemon times single runs interleaved: plain true, lineage run
// through the daemon and standalone.
func measureDaemon(lineageBin, spawner, sock string, runs int) (daemonResult, error) {
	res := daemonResult{walls: map[string][]float64{}}
	for i := 0; i < runs; i++ {
		for _, c := range []string{viaTrue, viaDaemon, viaStandalone} {
			cmd := exec.Command("true")
			switch c {
			case viaDaemon:
				cmd = runCommand(lineageBin, sock, "true")
			case viaStandalone:
				cmd = runCommand(lineageBin, "", "true")
			}
			start := time.Now()
			if out, err := cmd.CombinedOutput(); err != nil {
				return res, fmt.Errorf("%s: %v: %s", c, err, out)
			}
			res.walls[c] = append(res.walls[c], float64(time.Since(start)))
		}
	}
	// The peaks, in runs of their own: peakRSS's parent is not timed. The
	// front is read from disk first, as an installed binary is after a
	// boot: see evictFile.
	if err := evictFile(lineageBin); err != nil {
		return res, err
	}
	env := runCommand(lineageBin, sock).Env
	for i := 0; i < max(runs/3, 5); i++ {
		kib, err := peakRSS(spawner, env, lineageBin, "run", "-q", "--", "true")
		if err != nil {
			return res, fmt.Errorf("peak RSS: %w", err)
		}
		res.rss = append(res.rss, kib)
	}
	return res, nil
}

func printDaemon(res daemonResult) {
	fmt.Println("### lineage run through the daemon (single runs, median)")
	fmt.Println()
	fmt.Println("| command | wall time | over plain `true` |")
	fmt.Println("|---|---|---|")
	base := median(res.walls[viaTrue])
	for _, k := range []string{viaTrue, viaDaemon, viaStandalone} {
		m := median(res.walls[k])
		fmt.Printf("| `%s` | %s | +%s |\n", k, time.Duration(m).Round(100*time.Microsecond), time.Duration(m-base).Round(100*time.Microsecond))
	}
	fmt.Println()
	fmt.Printf("Peak RSS of a `lineage run -- true` client through the daemon (its own, started by a small parent; %d runs): median %.1f MiB, max %.1f MiB.\n\n", len(res.rss), median(res.rss)/1024, maxOf(res.rss)/1024)
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// benchDaemon is `-only daemon`: the wall times against one daemon, then
// the fork rates beside idle runs, each condition with a daemon of its own.
func benchDaemon(lineageBin string, runs int, fr forkRounds) {
	dir, err := tempDir("", "lineage-bench")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	spawner, err := buildSpawner(dir)
	if err != nil {
		fail(err)
	}
	d, err := startDaemon(lineageBin, dir)
	if err != nil {
		fail(err)
	}
	res, err := measureDaemon(lineageBin, spawner, d.sock, runs)
	// fail exits at once: the daemon is stopped first.
	d.stop()
	if err != nil {
		fail(err)
	}
	printDaemon(res)
	if fr.rounds <= 0 || fr.forks <= 0 {
		return
	}
	fr.lineage, fr.spawner, fr.dir = lineageBin, spawner, dir
	forks, err := fr.measure()
	if err != nil {
		fail(err)
	}
	forks.print(fr)
}
