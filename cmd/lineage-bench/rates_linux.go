package main

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/loader"
)

// The three conditions a spawner runs under.
const (
	condNone    = "no tracker"
	condLoaded  = "tracker loaded, not tracking"
	condTracked = "tracker tracking the spawner"
)

var conditions = []string{condNone, condLoaded, condTracked}

type rateKey struct{ mode, cond string }

// measureRates runs the spawner in both modes under the three conditions,
// interleaved: every round runs each condition once, in a rotating order, so
// that drift on the machine hits them all alike.
func measureRates(spawner string, rounds, forks, execs int) (map[rateKey][]float64, error) {
	out := make(map[rateKey][]float64)
	for r := 0; r < rounds; r++ {
		for i := range conditions {
			cond := conditions[(i+r)%len(conditions)]
			for _, mode := range []string{"fork", "exec"} {
				n := forks
				if mode == "exec" {
					n = execs
				}
				rate, err := runSpawner(spawner, mode, n, cond)
				if err != nil {
					return nil, fmt.Errorf("%s, %s: %w", mode, cond, err)
				}
				k := rateKey{mode, cond}
				out[k] = append(out[k], rate)
			}
		}
	}
	return out, nil
}

// runSpawner returns the spawner's rate in operations per second.
func runSpawner(spawner, mode string, n int, cond string) (float64, error) {
	cmd := exec.Command(spawner, mode, strconv.Itoa(n))
	var output []byte
	var err error
	switch cond {
	case condNone:
		output, err = cmd.Output()
	default:
		b, oerr := loader.OpenBPF(nil)
		if oerr != nil {
			return 0, oerr
		}
		defer b.Close()
		if cond == condLoaded {
			output, err = cmd.Output()
			break
		}
		// Tracked: the spawner is a root, and a reader drains the events
		// as `lineage run` does.
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		events := 0
		go func() { done <- b.Run(ctx, func(lineage.Event) { events++ }) }()
		var buf strings.Builder
		cmd.Stdout = &buf
		if _, err = b.Spawn(cmd, loader.RootOptions{}); err == nil {
			err = cmd.Wait()
		}
		cancel()
		<-done
		output = []byte(buf.String())
		st, serr := b.Stats()
		if serr == nil && st.Forks < uint64(n) {
			return 0, fmt.Errorf("the tracker counted %d forks of %d: it was not tracking", st.Forks, n)
		}
	}
	if err != nil {
		return 0, err
	}
	var ops int
	var secs float64
	if _, err := fmt.Sscanf(string(output), "%d %g", &ops, &secs); err != nil || secs <= 0 {
		return 0, fmt.Errorf("spawner said %q", output)
	}
	return float64(ops) / secs, nil
}

func printRates(rates map[rateKey][]float64) {
	fmt.Println("### Spawner rates (median of interleaved rounds)")
	fmt.Println()
	fmt.Println("| workload | no tracker | loaded, not tracking | tracking | untracked / none | tracked / none |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, mode := range []string{"fork", "exec"} {
		none := median(rates[rateKey{mode, condNone}])
		loaded := median(rates[rateKey{mode, condLoaded}])
		tracked := median(rates[rateKey{mode, condTracked}])
		name := "fork+exit+wait"
		if mode == "exec" {
			name = "fork+exec+wait"
		}
		fmt.Printf("| %s | %.0f/s | %.0f/s | %.0f/s | %.3f | %.3f |\n", name, none, loaded, tracked, loaded/none, tracked/none)
	}
	fmt.Println()
}
