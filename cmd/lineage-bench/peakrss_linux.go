package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strconv"
)

// peakRSS runs argv, with env, and returns its peak resident set in KiB as
// the kernel counts it, its waited-for children included. A process that
// os/exec starts shares its parent's memory until it execs (vfork), and
// the kernel counts the parent's resident set at that exec toward the
// child's peak: started from this benchmark, a small client's peak would
// read as the benchmark's own. So the spawner, a small C parent, forks it
// and prints the figure.
func peakRSS(spawner string, env []string, argv ...string) (float64, error) {
	cmd := exec.Command(spawner, append([]string{"rss"}, argv...)...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("%v: %v", argv, err)
	}
	return strconv.ParseFloat(string(bytes.TrimSpace(out)), 64)
}
