package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
)

// The figures of a daemon many users share (-only shared):
//
//   - registration (`lineage exec -- true` over `true`) and a turn end with
//     1, 100, 1,000 and 10,000 sessions open: one daemon per count, the
//     counts interleaved round by round; the target is flat, within 1.2×
//     of one session;
//   - root's GET /v1/status, p50 and p99, idle and while uid 65534 holds
//     its maximum of event streams, interleaved round by round; the target
//     is within 1.5× of idle.

// sharedBench are the flags of -only shared.
type sharedBench struct {
	runs, samples         int
	holdSock, holdSession string
}

func sharedFlags() *sharedBench {
	var sh sharedBench
	flag.IntVar(&sh.runs, "shared-runs", 10, "with -only shared: `lineage exec -- true` runs per round and count of sessions")
	flag.IntVar(&sh.samples, "shared-samples", 200, "with -only shared: root's status requests per round")
	flag.StringVar(&sh.holdSock, "hold-streams", "", "internal: as uid 65534, hold the streams of -hold-session on this socket")
	flag.StringVar(&sh.holdSession, "hold-session", "", "internal: the session -hold-streams opens")
	return &sh
}

// sharedCounts are the numbers of open sessions registration is timed at.
var sharedCounts = []int{1, 100, 1000, 10000}

func benchShared(lineageBin string, rounds, runs, samples int) {
	load := loadAverage()
	fmt.Printf("### A daemon shared by many users (`lineage serve`, bpf; median of %d interleaved rounds)\n\n", rounds)
	fmt.Printf("Load average at the start: %s.\n\n", load)
	fmt.Println("| figure | lineage | over one session / idle | target |")
	fmt.Println("|---|---|---|---|")
	scale, err := measureScale(lineageBin, rounds, runs)
	if err != nil {
		fail(fmt.Errorf("sessions open: %w", err))
	}
	one := scale[sharedCounts[0]]
	for _, n := range sharedCounts {
		s := scale[n]
		fmt.Printf("| `lineage exec -- true` over `true`, %d sessions open | +%s | %.2f× | ≤ 1.2× |\n", n, us(s.exec), s.exec/one.exec)
	}
	for _, n := range sharedCounts {
		s := scale[n]
		fmt.Printf("| turn end (%d roots that exited), %d sessions open | %s | %.2f× | ≤ 1.2× |\n", runs, n, us(s.turnEnd), s.turnEnd/one.turnEnd)
	}
	idle, held, holding, err := measureHeldStreams(lineageBin, rounds, samples)
	if err != nil {
		fail(fmt.Errorf("streams held: %w", err))
	}
	fmt.Printf("| root's `GET /v1/status`, idle, p50 / p99 | %s / %s | | |\n", us(idle.p50), us(idle.p99))
	fmt.Printf("| the same while uid 65534 holds %d streams (its maximum), p50 / p99 | %s / %s | %.2f× / %.2f× | ≤ 1.5× |\n",
		holding, us(held.p50), us(held.p99), held.p50/idle.p50, held.p99/idle.p99)
	fmt.Println()
}

// scaleFigure is one count's medians: `lineage exec -- true` over `true`,
// and the turn end after the runs.
type scaleFigure struct{ exec, turnEnd float64 }

// measureScale starts a daemon per count, opens that many sessions in it
// (empty ones, as a uid squatting names would), and times registration
// and turn end in each, interleaved round by round.
func measureScale(lineageBin string, rounds, runs int) (map[int]scaleFigure, error) {
	daemons := make(map[int]*serveDaemon, len(sharedCounts))
	defer func() {
		for _, d := range daemons {
			d.stop()
		}
	}()
	for _, n := range sharedCounts {
		d, err := startBenchDaemon(lineageBin, false, "")
		if err != nil {
			return nil, err
		}
		daemons[n] = d
		for i := 1; i < n; i++ {
			if err := d.do("POST", "/v1/sessions", api.OpenSession{ID: fmt.Sprintf("idle-%d", i), Kind: "autonomous"}, nil); err != nil {
				return nil, fmt.Errorf("open session %d of %d: %w", i, n, err)
			}
		}
	}
	execs, turns := make(map[int][]float64), make(map[int][]float64)
	var plain []float64
	for r := 0; r < rounds; r++ {
		start := time.Now()
		for i := 0; i < runs; i++ {
			if err := exec.Command("true").Run(); err != nil {
				return nil, err
			}
		}
		plain = append(plain, float64(time.Since(start))/float64(runs))
		for _, n := range sharedCounts {
			d := daemons[n]
			start := time.Now()
			for i := 0; i < runs; i++ {
				if msg, err := d.lineageExec("bench-scale", "true").CombinedOutput(); err != nil {
					return nil, fmt.Errorf("exec with %d sessions: %v: %s", n, err, msg)
				}
			}
			execs[n] = append(execs[n], float64(time.Since(start))/float64(runs))
			start = time.Now()
			if err := d.do("POST", "/v1/sessions/bench-scale/turn-end", nil, nil); err != nil {
				return nil, err
			}
			turns[n] = append(turns[n], float64(time.Since(start)))
		}
	}
	out := make(map[int]scaleFigure, len(sharedCounts))
	for _, n := range sharedCounts {
		out[n] = scaleFigure{exec: median(execs[n]) - median(plain), turnEnd: median(turns[n])}
		if err := daemons[n].do("POST", "/v1/sessions/bench-scale/close", nil, nil); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// latencies are a figure's p50 and p99, in ns.
type latencies struct{ p50, p99 float64 }

// measureHeldStreams times root's status (samples requests a round, each
// on a connection of its own, as a client new to the daemon asks) idle and
// while uid 65534 holds its maximum of streams, rounds times each,
// interleaved; it returns the medians over the rounds of each round's p50
// and p99, and how many streams the uid held.
func measureHeldStreams(lineageBin string, rounds, samples int) (idle, held latencies, holding int, err error) {
	d, err := startBenchDaemon(lineageBin, false, "", "--socket-mode", "0666")
	if err != nil {
		return idle, held, 0, err
	}
	defer d.stop()
	if err := os.Chmod(d.dir, 0o755); err != nil {
		return idle, held, 0, err
	}
	self, err := os.Executable()
	if err != nil {
		return idle, held, 0, err
	}
	// A copy uid 65534 can run.
	hdir, err := tempDir("", "lineage-bench-holder")
	if err != nil {
		return idle, held, 0, err
	}
	defer os.RemoveAll(hdir)
	if err := os.Chmod(hdir, 0o755); err != nil {
		return idle, held, 0, err
	}
	holderBin := filepath.Join(hdir, "lineage-bench")
	if err := copyExecutable(self, holderBin); err != nil {
		return idle, held, 0, err
	}
	var p50s, p99s [2][]float64
	for r := 0; r < rounds; r++ {
		for i, hold := range []bool{false, true} {
			var h *exec.Cmd
			var stdin io.WriteCloser
			if hold {
				if h, stdin, holding, err = startHolder(holderBin, d.sock, fmt.Sprintf("held-%d", r)); err != nil {
					return idle, held, 0, err
				}
			}
			l, err := statusLatencies(d.sock, samples)
			if h != nil {
				stdin.Close()
				_ = h.Wait()
			}
			if err != nil {
				return idle, held, 0, err
			}
			p50s[i] = append(p50s[i], l.p50)
			p99s[i] = append(p99s[i], l.p99)
		}
	}
	idle = latencies{median(p50s[0]), median(p99s[0])}
	held = latencies{median(p50s[1]), median(p99s[1])}
	return idle, held, holding, nil
}

func us(ns float64) string { return time.Duration(ns).Round(time.Microsecond).String() }

func copyExecutable(from, to string) error {
	data, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, data, 0o755)
}

// startHolder starts this program as uid 65534 holding as many streams of
// a session of its own as the daemon gives it, and returns once it holds
// them, with how many; closing its stdin ends it.
func startHolder(bin, sock, session string) (*exec.Cmd, io.WriteCloser, int, error) {
	cmd := exec.Command(bin, "-hold-streams", sock, "-hold-session", session)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, nil, 0, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, nil, 0, err
	}
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		stdin.Close()
		_ = cmd.Wait()
		return nil, nil, 0, fmt.Errorf("the holder: %w", err)
	}
	n, err := strconv.Atoi(line[:len(line)-1])
	if err != nil {
		stdin.Close()
		_ = cmd.Wait()
		return nil, nil, 0, fmt.Errorf("the holder said %q", line)
	}
	return cmd, stdin, n, nil
}

// maxHeldStreams bounds the streams the holder opens.
const maxHeldStreams = 4096

// holdStreams is -hold-streams: open a session, then its streams until the
// daemon refuses one, say how many it holds, and hold them until stdin
// closes.
func holdStreams(sock, session string) {
	c := client.New(sock)
	ctx := context.Background()
	if err := c.Do(ctx, "POST", "/v1/sessions", api.OpenSession{ID: session}, nil); err != nil {
		fail(err)
	}
	var held []io.ReadCloser
	// A daemon with no quota gives without end: stop at a few thousand.
	for len(held) < maxHeldStreams {
		body, err := client.New(sock).Stream(ctx, "/v1/events?session="+session)
		if err != nil {
			break
		}
		held = append(held, body)
	}
	fmt.Println(len(held))
	_, _ = io.Copy(io.Discard, os.Stdin)
	for _, b := range held {
		b.Close()
	}
	if err := c.Do(ctx, "POST", "/v1/sessions/"+session+"/close", nil, nil); err != nil {
		fail(err)
	}
}

// statusLatencies times n of root's GET /v1/status, each on a connection
// of its own.
func statusLatencies(sock string, n int) (latencies, error) {
	took := make([]float64, 0, n)
	for range n {
		c := client.New(sock)
		start := time.Now()
		var st api.Status
		err := c.Do(context.Background(), "GET", "/v1/status", nil, &st)
		took = append(took, float64(time.Since(start)))
		c.Close()
		if err != nil {
			return latencies{}, err
		}
	}
	slices.Sort(took)
	return latencies{took[n/2], took[n*99/100]}, nil
}
