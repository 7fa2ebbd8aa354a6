package main

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
)

// usableVariants parses a comma-separated list of variants and keeps the
// ones this kernel loads, saying on stderr which it leaves out.
func usableVariants(list string) ([]loader.Variant, error) {
	var out []loader.Variant
	for _, name := range strings.Split(list, ",") {
		name = strings.TrimSpace(name)
		if name == "auto" {
			name = ""
		}
		v, err := loader.ParseVariant(name)
		if err != nil {
			return nil, fmt.Errorf("-variants: %w", err)
		}
		b, err := bpf.Open(&bpf.Options{Variant: v})
		if errors.Is(err, loader.ErrVariantUnsupported) {
			fmt.Fprintf(os.Stderr, "lineage-bench: %s left out: %v\n", variantName(v), err)
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("open the %s program: %w", variantName(v), err)
		}
		b.Close()
		out = append(out, v)
	}
	if len(out) == 0 {
		return nil, errors.New("no variant of the program loads here")
	}
	return out, nil
}

// The ways the guardian benchmark runs the spawner.
const (
	guardNone = "spawner alone"
	guardOff  = "lineage run (auto)"
	guardOn   = "lineage run --hard-cancel guardian"
)

var guardCases = []string{guardNone, guardOff, guardOn}

// guardResult holds the spawner's fork rates per case, and what hard
// cancel the automatic choice gives on this kernel.
type guardResult struct {
	rates map[string][]float64
	auto  loader.HardCancelMode
}

// measureGuardian runs the fork spawner alone and under `lineage run` with
// and without a guardian, interleaved round by round: a guardian must cost
// the job nothing measurable.
func measureGuardian(lineageBin, spawner string, rounds, forks int) (guardResult, error) {
	res := guardResult{rates: map[string][]float64{}}
	b, err := bpf.Open(nil)
	if err != nil {
		return res, err
	}
	res.auto = b.HardCancel()
	b.Close()
	job := []string{spawner, "fork", strconv.Itoa(forks)}
	if spawnerCPU >= 0 {
		job = append([]string{"taskset", "-c", strconv.Itoa(spawnerCPU)}, job...)
	}
	run := []string{lineageBin, "run", "-q", "--standalone", "--backend", "bpf"}
	for r := 0; r < rounds; r++ {
		for i := range guardCases {
			c := guardCases[(i+r)%len(guardCases)]
			argv := job
			switch c {
			case guardOff:
				argv = append(append(run[:len(run):len(run)], "--"), job...)
			case guardOn:
				argv = append(append(run[:len(run):len(run)], "--hard-cancel", "guardian", "--"), job...)
			}
			settle()
			out, err := exec.Command(argv[0], argv[1:]...).Output()
			if err != nil {
				return res, fmt.Errorf("%s: %w", c, err)
			}
			var ops int
			var secs float64
			if _, err := fmt.Sscanf(string(out), "%d %g", &ops, &secs); err != nil || secs <= 0 {
				return res, fmt.Errorf("%s: spawner said %q", c, out)
			}
			res.rates[c] = append(res.rates[c], float64(ops)/secs)
		}
	}
	return res, nil
}

func printGuardian(g guardResult) {
	fmt.Println("### The guardian's cost to the job (fork+exit+wait under lineage run)")
	fmt.Println()
	fmt.Printf("Hard cancel on this kernel without the flag: %s.\n", g.auto)
	fmt.Println()
	fmt.Println("| how the spawner runs | fork+exit+wait | / spawner alone | / lineage run (auto) |")
	fmt.Println("|---|---|---|---|")
	for _, c := range guardCases {
		fmt.Printf("| %s | %.0f/s | %.3f | %.3f |\n", c, median(g.rates[c]),
			medianRatio(g.rates[c], g.rates[guardNone]), medianRatio(g.rates[c], g.rates[guardOff]))
	}
	fmt.Println()
}
