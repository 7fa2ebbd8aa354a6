package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	// forks maps a count of idle concurrent runs (through the daemon or
	// standalone) to an unrelated spawner's fork rates.
	forks map[string][]float64
}

// measureDaemon times single runs interleaved: plain true, lineage run
// through the daemon and standalone.
func measureDaemon(lineageBin, sock string, runs int) (daemonResult, error) {
	res := daemonResult{walls: map[string][]float64{}, forks: map[string][]float64{}}
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
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok && c == viaDaemon {
				res.rss = append(res.rss, float64(ru.Maxrss))
			}
		}
	}
	return res, nil
}

// measureIdleRuns measures an unrelated spawner's fork rate beside n idle
// `lineage run`s, for each n, through the daemon and standalone.
func measureIdleRuns(res daemonResult, lineageBin, sock, spawner string, rounds, forks int) error {
	for r := 0; r < rounds; r++ {
		for _, n := range []int{0, 1, 4, 16} {
			for _, via := range []string{sock, ""} {
				if n == 0 && via == "" {
					continue
				}
				rate, err := rateBeside(lineageBin, via, spawner, n, forks)
				if err != nil {
					return err
				}
				res.forks[idleKey(n, via != "")] = append(res.forks[idleKey(n, via != "")], rate)
			}
		}
	}
	return nil
}

func idleKey(n int, daemon bool) string {
	if n == 0 {
		return "0"
	}
	if daemon {
		return strconv.Itoa(n) + " through the daemon"
	}
	return strconv.Itoa(n) + " standalone"
}

// rateBeside starts n idle runs, lets them settle, runs the spawner alone
// and ends the runs.
func rateBeside(lineageBin, sock, spawner string, n, forks int) (float64, error) {
	var idle []*exec.Cmd
	defer func() {
		for _, c := range idle {
			_ = c.Process.Signal(syscall.SIGTERM)
			_ = c.Wait()
		}
	}()
	for range n {
		c := runCommand(lineageBin, sock, "sleep", "600")
		if err := c.Start(); err != nil {
			return 0, err
		}
		idle = append(idle, c)
	}
	// Standalone runs load their programs: give them the time.
	wait := 200*time.Millisecond + time.Duration(n)*50*time.Millisecond
	if sock == "" {
		wait = 500*time.Millisecond + time.Duration(n)*700*time.Millisecond
	}
	time.Sleep(wait)
	settle()
	job := []string{spawner, "fork", strconv.Itoa(forks)}
	if spawnerCPU >= 0 {
		job = append([]string{"taskset", "-c", strconv.Itoa(spawnerCPU)}, job...)
	}
	out, err := exec.Command(job[0], job[1:]...).Output()
	if err != nil {
		return 0, fmt.Errorf("spawner: %w", err)
	}
	var ops int
	var secs float64
	if _, err := fmt.Sscanf(string(out), "%d %g", &ops, &secs); err != nil || secs <= 0 {
		return 0, fmt.Errorf("spawner said %q", out)
	}
	return float64(ops) / secs, nil
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
	fmt.Printf("Peak RSS of a `lineage run` client through the daemon: median %.1f MiB, max %.1f MiB.\n\n", median(res.rss)/1024, maxOf(res.rss)/1024)
	if len(res.forks) == 0 {
		return
	}
	fmt.Println("| idle `lineage run`s beside an unrelated spawner | fork+exit+wait | / none |")
	fmt.Println("|---|---|---|")
	for _, n := range []int{0, 1, 4, 16} {
		for _, d := range []bool{true, false} {
			k := idleKey(n, d)
			if n == 0 && !d {
				continue
			}
			fmt.Printf("| %s | %.0f/s | %.3f |\n", k, median(res.forks[k]), medianRatio(res.forks[k], res.forks["0"]))
		}
	}
	fmt.Println()
}

func maxOf(xs []float64) float64 {
	m := 0.0
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}

// benchDaemon is `-only daemon`.
func benchDaemon(lineageBin string, runs, rounds, forks int) {
	dir, err := tempDir("", "lineage-bench")
	if err != nil {
		fail(err)
	}
	defer os.RemoveAll(dir)
	d, err := startDaemon(lineageBin, dir)
	if err != nil {
		fail(err)
	}
	res, err := measureDaemon(lineageBin, d.sock, runs)
	if err == nil && forks > 0 {
		var spawner string
		if spawner, err = buildSpawner(dir); err == nil {
			err = measureIdleRuns(res, lineageBin, d.sock, spawner, min(rounds, 3), forks)
		}
	}
	// fail exits at once: the daemon is stopped first.
	d.stop()
	if err != nil {
		fail(err)
	}
	printDaemon(res)
}
