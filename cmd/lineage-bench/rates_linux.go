package main

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/lineage"
)

// The conditions a spawner runs under: no tracker, and, for each variant
// of the BPF program measured, the tracker loaded but not tracking it and
// the tracker tracking it.
const (
	condNone    = "no tracker"
	condLoaded  = "tracker loaded, not tracking"
	condTracked = "tracker tracking the spawner"
)

// condition is one way the spawner runs: cond, with variant (empty for
// condNone; loader.VariantAuto for the program this kernel gets).
type condition struct {
	cond    string
	variant loader.Variant
}

// conditionsFor returns the conditions measured for variants, no tracker
// first.
func conditionsFor(variants []loader.Variant) []condition {
	out := []condition{{cond: condNone}}
	for _, v := range variants {
		out = append(out, condition{condLoaded, v}, condition{condTracked, v})
	}
	return out
}

type rateKey struct {
	mode string
	condition
}

// bpfCost is the kernel's own account of the tracker's programs: CPU time
// per spawner iteration, while loaded and while tracking. bpfPerRun is the
// same time per program run: every process on the machine runs the hooks,
// so it holds steadier than bpfCost on a shared machine.
var bpfCost, bpfPerRun = map[rateKey][]float64{}, map[rateKey][]float64{}

// measureRates runs the spawner in both modes under the three conditions,
// interleaved: every round runs each condition once, in a rotating order, so
// that drift on the machine hits them all alike.
func measureRates(spawner string, variants []loader.Variant, rounds, forks, execs int) (map[rateKey][]float64, error) {
	conditions := conditionsFor(variants)
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
					return nil, fmt.Errorf("%s, %s %s: %w", mode, cond.cond, cond.variant, err)
				}
				k := rateKey{mode, cond}
				out[k] = append(out[k], rate)
			}
		}
	}
	return out, nil
}

// settle collects the garbage that loading the tracker left behind, so that
// the collector does not compete with the spawner for the CPUs: that would
// be a cost of the benchmark, not of the tracker.
func settle() {
	runtime.GC()
	debug.FreeOSMemory()
}

// spawnerCPU is the CPU the spawner and its children are pinned to, away
// from the benchmark itself and its event reader (which scripts/bench.sh
// pins to CPU 0): -1 when there is only one CPU or no taskset.
var spawnerCPU = func() int {
	if machineCPUs() < 2 {
		return -1
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		return -1
	}
	return machineCPUs() - 1
}()

// runSpawner returns the spawner's rate in operations per second.
func runSpawner(spawner, mode string, n int, c condition) (float64, error) {
	cmd := exec.Command(spawner, mode, strconv.Itoa(n))
	if spawnerCPU >= 0 {
		cmd = exec.Command("taskset", "-c", strconv.Itoa(spawnerCPU), spawner, mode, strconv.Itoa(n))
	}
	var output []byte
	var err error
	switch c.cond {
	case condNone:
		settle()
		output, err = cmd.Output()
	default:
		b, oerr := bpf.Open(&bpf.Options{Variant: c.variant})
		if oerr != nil {
			return 0, oerr
		}
		defer b.Close()
		stats, serr := bpf.EnableRuntimeStats()
		if serr != nil {
			return 0, serr
		}
		defer stats.Close()
		defer func() {
			if rt, err := b.Runtime(); err == nil {
				k := rateKey{mode, c}
				bpfCost[k] = append(bpfCost[k], float64(rt.Runtime)/float64(n))
				if rt.Runs > 0 {
					bpfPerRun[k] = append(bpfPerRun[k], float64(rt.Runtime)/float64(rt.Runs))
				}
			}
		}()
		settle()
		if c.cond == condLoaded {
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

// workloads names the spawner's modes as the tables show them.
var workloads = []struct{ mode, name string }{{"fork", "fork+exit+wait"}, {"exec", "fork+exec+wait"}}

// variantName is how the tables name a variant.
func variantName(v loader.Variant) string {
	if v == loader.VariantAuto {
		return "this kernel's"
	}
	return string(v)
}

func printRates(rates map[rateKey][]float64, variants []loader.Variant) {
	fmt.Println("### Spawner rates (median of interleaved rounds)")
	fmt.Println()
	fmt.Println("Ratios are the median of each round's own ratio: the conditions of one round ran back to back.")
	if spawnerCPU >= 0 {
		fmt.Printf("The spawner and its children ran on CPU %d, the benchmark and its event reader elsewhere.\n", spawnerCPU)
	}
	fmt.Println()
	fmt.Println("| workload | program | no tracker | loaded, not tracking | tracking | untracked / none | tracked / none | tracked / none, rounds' quartiles |")
	fmt.Println("|---|---|---|---|---|---|---|---|")
	for _, w := range workloads {
		none := rates[rateKey{w.mode, condition{cond: condNone}}]
		for _, v := range variants {
			loaded := rates[rateKey{w.mode, condition{condLoaded, v}}]
			tracked := rates[rateKey{w.mode, condition{condTracked, v}}]
			lo, hi := ratioQuartiles(tracked, none)
			fmt.Printf("| %s | %s | %.0f/s | %.0f/s | %.0f/s | %.3f | %.3f | %.3f–%.3f |\n", w.name, variantName(v),
				median(none), median(loaded), median(tracked), medianRatio(loaded, none), medianRatio(tracked, none), lo, hi)
		}
	}
	fmt.Println()
	fmt.Println("The kernel's own account of the tracker's programs (BPF run-time stats), per spawner iteration:")
	fmt.Println()
	fmt.Println("| workload | program | loaded, not tracking | tracking | tracking, share of one iteration | per hook run, not tracking | per hook run, tracking |")
	fmt.Println("|---|---|---|---|---|---|---|")
	for _, w := range workloads {
		perIter := 1e9 / median(rates[rateKey{w.mode, condition{cond: condNone}}])
		for _, v := range variants {
			loaded := median(bpfCost[rateKey{w.mode, condition{condLoaded, v}}])
			tracked := median(bpfCost[rateKey{w.mode, condition{condTracked, v}}])
			fmt.Printf("| %s | %s | %.0f ns | %.0f ns | %.4f | %.0f ns | %.0f ns |\n", w.name, variantName(v), loaded, tracked, tracked/perIter,
				median(bpfPerRun[rateKey{w.mode, condition{condLoaded, v}}]), median(bpfPerRun[rateKey{w.mode, condition{condTracked, v}}]))
		}
	}
	fmt.Println()
}

// medianRatio is the median over rounds of a[i]/b[i].
func medianRatio(a, b []float64) float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	return median(r)
}
