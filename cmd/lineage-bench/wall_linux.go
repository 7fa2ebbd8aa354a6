package main

import (
	"fmt"
	"os/exec"
	"time"
)

type wallKey string

// measureRunWall times `true` plain and under `lineage run`, interleaved.
func measureRunWall(lineageBin string, rounds, runs int) (map[wallKey][]float64, error) {
	cases := []struct {
		name wallKey
		argv []string
	}{
		{"true", []string{"true"}},
		{"lineage run -- true (bpf)", []string{lineageBin, "run", "-q", "--standalone", "--backend", "bpf", "--", "true"}},
		{"lineage run -- true (proc)", []string{lineageBin, "run", "-q", "--standalone", "--backend", "proc", "--", "true"}},
	}
	out := make(map[wallKey][]float64)
	for r := 0; r < rounds; r++ {
		for _, c := range cases {
			start := time.Now()
			for i := 0; i < runs; i++ {
				if out, err := exec.Command(c.argv[0], c.argv[1:]...).CombinedOutput(); err != nil {
					return nil, fmt.Errorf("%s: %v: %s", c.name, err, out)
				}
			}
			out[c.name] = append(out[c.name], float64(time.Since(start))/float64(runs))
		}
	}
	return out, nil
}

func printWalls(walls map[wallKey][]float64) {
	fmt.Println("### Wall time of one run (median of interleaved rounds)")
	fmt.Println()
	fmt.Println("| command | wall time | over plain `true` |")
	fmt.Println("|---|---|---|")
	base := median(walls["true"])
	for _, k := range []wallKey{"true", "lineage run -- true (bpf)", "lineage run -- true (proc)"} {
		m := median(walls[k])
		fmt.Printf("| `%s` | %s | +%s |\n", k, time.Duration(m).Round(10*time.Microsecond), time.Duration(m-base).Round(10*time.Microsecond))
	}
	fmt.Println()
}
