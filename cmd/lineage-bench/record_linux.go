package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
)

// The two conditions of the recording benchmark: the spawner run by the
// real `lineage run`, with and without --record.
const (
	condRun    = "lineage run"
	condRecord = "lineage run --record"
)

// measureRecordRates runs the spawner under `lineage run --backend bpf`
// with and without `--record FILE` (a file in a fresh directory under
// /tmp), interleaved in a rotating order, and returns its rates.
func measureRecordRates(lineageBin, spawner string, rounds, forks, execs int) (map[rateKey][]float64, error) {
	dir, err := tempDir("/tmp", "lineage-bench-record")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	conds := []string{condRun, condRecord}
	out := make(map[rateKey][]float64)
	for r := 0; r < rounds; r++ {
		for i := range conds {
			cond := conds[(i+r)%len(conds)]
			for _, mode := range []string{"fork", "exec"} {
				n := forks
				if mode == "exec" {
					n = execs
				}
				rate, err := runUnderLineage(lineageBin, spawner, mode, n, cond == condRecord, filepath.Join(dir, "rec.jsonl"))
				if err != nil {
					return nil, fmt.Errorf("%s, %s: %w", mode, cond, err)
				}
				key := rateKey{mode, condition{cond: cond}}
				out[key] = append(out[key], rate)
			}
		}
	}
	return out, nil
}

// runUnderLineage returns the spawner's rate under `lineage run`.
func runUnderLineage(lineageBin, spawner, mode string, n int, record bool, path string) (float64, error) {
	args := []string{"run", "-q", "--backend", "bpf"}
	if record {
		args = append(args, "--record", path)
	}
	args = append(args, "--")
	if spawnerCPU >= 0 {
		args = append(args, "taskset", "-c", strconv.Itoa(spawnerCPU))
	}
	args = append(args, spawner, mode, strconv.Itoa(n))
	cmd := exec.Command(lineageBin, args...)
	if spawnerCPU >= 0 {
		// lineage and its event reader run beside the spawner, not on
		// its CPU, as in the rates above.
		cmd = exec.Command("taskset", append([]string{"-c", "0", lineageBin}, args...)...)
	}
	settle()
	output, err := cmd.Output()
	if err != nil {
		return 0, err
	}
	var ops int
	var secs float64
	if _, err := fmt.Sscanf(string(output), "%d %g", &ops, &secs); err != nil || secs <= 0 {
		return 0, fmt.Errorf("spawner said %q", output)
	}
	if record {
		if fi, err := os.Stat(path); err != nil || fi.Size() < int64(n)*100 {
			return 0, fmt.Errorf("the record is too small for %d processes: %v", n, err)
		}
	}
	return float64(ops) / secs, nil
}

func printRecordRates(rates map[rateKey][]float64) {
	fmt.Println("### Recording (median of interleaved rounds)")
	fmt.Println()
	fmt.Println("The spawner under `lineage run --backend bpf`, with and without `--record` to a file in /tmp.")
	fmt.Println()
	fmt.Println("lineage and its event reader ran on CPU 0, the spawner on its own CPU.")
	fmt.Println()
	fmt.Println("| workload | lineage run | lineage run --record | recording / not | rounds' ratios, quartiles |")
	fmt.Println("|---|---|---|---|---|")
	for _, mode := range []string{"fork", "exec"} {
		name := "fork+exit+wait"
		if mode == "exec" {
			name = "fork+exec+wait"
		}
		plain, rec := rates[rateKey{mode, condition{cond: condRun}}], rates[rateKey{mode, condition{cond: condRecord}}]
		lo, hi := ratioQuartiles(rec, plain)
		fmt.Printf("| %s | %.0f/s | %.0f/s | %.3f | %.3f–%.3f |\n", name, median(plain), median(rec), medianRatio(rec, plain), lo, hi)
	}
	fmt.Println()
}

// ratioQuartiles are the first and third quartiles of the rounds' a[i]/b[i].
func ratioQuartiles(a, b []float64) (lo, hi float64) {
	var r []float64
	for i := range min(len(a), len(b)) {
		if b[i] > 0 {
			r = append(r, a[i]/b[i])
		}
	}
	if len(r) == 0 {
		return 0, 0
	}
	slices.Sort(r)
	return r[len(r)/4], r[len(r)*3/4]
}
