package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/record"
)

// sustainFlags are the flags of the record's sustained-rate figure.
type sustainFlags struct {
	rounds  *int
	rings   *string
	rates   *string
	seconds *float64
	workers *int
	argv    *int
	hog     *bool
}

func sustainFlagSet() *sustainFlags {
	return &sustainFlags{
		rounds:  flag.Int("sustain-rounds", 3, "rounds of the record's sustained-rate figure (with -record; 0: skip it)"),
		rings:   flag.String("sustain-rings", "64K,256K,1M,8M", "the ring buffer sizes the sustained rate is measured at"),
		rates:   flag.String("sustain-rates", "1000,2000,4000,8000,16000,32000", "the paced spawner's offered rates, processes a second"),
		seconds: flag.Float64("sustain-seconds", 2, "how long each paced run spawns"),
		workers: flag.Int("sustain-workers", 64, "the paced spawner's parallel workers: as many runnable processes as a fork storm has, which crowd out the reader"),
		argv:    flag.Int("sustain-argv", 300, "bytes of argv each process of the exec workload execs with"),
		hog:     flag.Bool("sustain-hog", true, "run a busy loop on every CPU beside the sustained-rate figure, as a loaded CI machine does"),
	}
}

// sustainWorkloads are the sustained-rate figure's workloads: processes
// that fork and exec (3 events each), and processes that fork and exit
// (2 events each), which come faster.
var sustainWorkloads = []struct {
	name string
	exec bool
}{{"fork+exec+exit", true}, {"fork+exit", false}}

// startHogs starts a busy loop on every CPU, for at most an hour; the
// function it returns ends them, by the pids it holds.
func startHogs(spawner string) (stop func(), err error) {
	var cmds []*exec.Cmd
	stop = func() {
		for _, c := range cmds {
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}
	for cpu := range machineCPUs() {
		c := exec.Command(spawner, "spin", "3600")
		if _, err := exec.LookPath("taskset"); err == nil {
			c = exec.Command("taskset", "-c", strconv.Itoa(cpu), spawner, "spin", "3600")
		}
		if err := c.Start(); err != nil {
			stop()
			return nil, err
		}
		cmds = append(cmds, c)
	}
	return stop, nil
}

// sustained is one ring size's result in one round: the highest event
// rate a run reached with no event lost, and the first offered rate at
// which one was lost (0: none was, up to the highest).
type sustained struct {
	best      float64
	firstLoss int
}

// sustainKey names one row of the figure.
type sustainKey struct {
	ring     uint32
	workload string
}

// measureSustained runs, in each round, for each workload and ring size
// (in a rotating order), the paced spawner under `lineage run --record
// --ring-bytes SIZE` at rising rates, until a run loses events.
func measureSustained(lineageBin, spawner string, f *sustainFlags) (map[sustainKey][]sustained, []uint32, error) {
	rings, err := parseRings(*f.rings)
	if err != nil {
		return nil, nil, err
	}
	rates, err := parseRates(*f.rates)
	if err != nil {
		return nil, nil, err
	}
	dir, err := tempDir("/tmp", "lineage-bench-sustain")
	if err != nil {
		return nil, nil, err
	}
	defer os.RemoveAll(dir)
	if *f.hog {
		stop, err := startHogs(spawner)
		if err != nil {
			return nil, nil, fmt.Errorf("start the busy loops: %w", err)
		}
		defer stop()
	}
	out := make(map[sustainKey][]sustained)
	for r := 0; r < *f.rounds; r++ {
		for _, w := range sustainWorkloads {
			argv := 0
			if w.exec {
				argv = *f.argv
			}
			for i := range rings {
				ring := rings[(i+r)%len(rings)]
				var s sustained
				for _, rate := range rates {
					events, lost, err := runPaced(lineageBin, spawner, ring, rate, argv, f, filepath.Join(dir, "rec.jsonl"))
					if err != nil {
						return nil, nil, fmt.Errorf("%s, ring %s, %d/s: %w", w.name, loader.FormatBytes(uint64(ring)), rate, err)
					}
					if lost > 0 {
						s.firstLoss = rate
						break
					}
					s.best = max(s.best, events)
				}
				k := sustainKey{ring, w.name}
				out[k] = append(out[k], s)
			}
		}
	}
	return out, rings, nil
}

// runPaced runs the paced spawner at rate under `lineage run --record`
// and returns the events a second the record saw (those it holds and
// those it lost, over the spawner's time) and how many it lost.
func runPaced(lineageBin, spawner string, ring uint32, rate, argv int, f *sustainFlags, path string) (float64, uint64, error) {
	args := []string{"run", "-q", "--backend", "bpf", "--record", path, "--ring-bytes", strconv.FormatUint(uint64(ring), 10), "--",
		spawner, "paced", strconv.Itoa(rate), strconv.FormatFloat(*f.seconds, 'f', -1, 64), strconv.Itoa(argv), strconv.Itoa(*f.workers)}
	cmd := exec.Command(lineageBin, args...)
	if _, err := exec.LookPath("taskset"); err == nil && machineCPUs() > 1 {
		// Every CPU, whatever the benchmark itself is pinned to: the
		// reader competes with the spawner as it does in a real job.
		cmd = exec.Command("taskset", append([]string{"-c", fmt.Sprintf("0-%d", machineCPUs()-1), lineageBin}, args...)...)
	}
	settle()
	output, err := cmd.Output()
	if err != nil {
		return 0, 0, err
	}
	var ops int
	var secs float64
	if _, err := fmt.Sscanf(string(output), "%d %g", &ops, &secs); err != nil || secs <= 0 {
		return 0, 0, fmt.Errorf("spawner said %q", output)
	}
	events, lost, err := countRecord(path)
	if err != nil {
		return 0, 0, err
	}
	return float64(events+lost) / secs, lost, nil
}

// countRecord counts a record's fork, exec and exit events, and the events
// its losses say it lost.
func countRecord(path string) (events, lost uint64, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	r, err := record.NewReader(f)
	if err != nil {
		return 0, 0, err
	}
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return events, lost, nil
		}
		if err != nil {
			return 0, 0, err
		}
		switch ev.Kind {
		case record.KindFork, record.KindExec, record.KindExit:
			events++
		case record.KindLoss:
			if ev.Reason == "events lost" || ev.Reason == "" {
				lost += ev.Count
			}
		}
	}
}

func parseRings(list string) ([]uint32, error) {
	var out []uint32
	for _, s := range strings.Split(list, ",") {
		n, err := loader.ParseRingBytes(s)
		if err != nil {
			return nil, fmt.Errorf("-sustain-rings: %w", err)
		}
		out = append(out, n)
	}
	return out, nil
}

func parseRates(list string) ([]int, error) {
	var out []int
	for _, s := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-sustain-rates: %q is not a rate", s)
		}
		out = append(out, n)
	}
	slices.Sort(out)
	return out, nil
}

func printSustained(res map[sustainKey][]sustained, rings []uint32, f *sustainFlags, load string) {
	fmt.Println("### Events a second the record sustains before its first loss, by ring size")
	fmt.Println()
	beside := "nothing else of the benchmark's"
	if *f.hog {
		beside = "a busy loop on every CPU"
	}
	fmt.Printf("The paced spawner (%d workers; fork+exec+exit: each process execs /bin/true with %d bytes of argv, 3 events; fork+exit: 2 events) under `lineage run --record --ring-bytes SIZE`, on every CPU, beside %s, for %gs a run at rising offered rates (%s processes/s) until a run loses an event; %d rounds, ring sizes interleaved; load %s.\n",
		*f.workers, *f.argv, beside, *f.seconds, *f.rates, *f.rounds, load)
	fmt.Println()
	fmt.Println("| workload | ring | events/s with none lost (median) | rounds' range | first offered rate that lost (processes/s, per round) |")
	fmt.Println("|---|---|---|---|---|")
	for _, w := range sustainWorkloads {
		for _, ring := range rings {
			var best []float64
			var first []string
			for _, s := range res[sustainKey{ring, w.name}] {
				best = append(best, s.best)
				if s.firstLoss > 0 {
					first = append(first, strconv.Itoa(s.firstLoss))
				} else {
					first = append(first, "none")
				}
			}
			if len(best) == 0 {
				continue
			}
			fmt.Printf("| %s | %s | %.0f | %.0f–%.0f | %s |\n", w.name, loader.FormatBytes(uint64(ring)), median(best), slices.Min(best), slices.Max(best), strings.Join(first, ", "))
		}
	}
	fmt.Println()
	fmt.Println("\"none\": no run lost an event up to the highest rate offered; the figure is then the highest rate the machine reached, not the record's limit. A round whose first rate lost has 0.")
	fmt.Println()
}
