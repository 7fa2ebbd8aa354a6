package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strconv"

	"golang.org/x/sys/unix"
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

// evictFile drops path's pages from the page cache, so that the next run
// reads it from disk. A binary the external linker has just written (the
// front, linked by gcc for its C fast path) sits in the page cache in large
// folios, and a fault maps a whole folio: its file-backed resident set then
// reads up to 4 MiB higher than the same binary's read from disk, though
// those pages are the page cache's, shared by every process that maps
// them.
func evictFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		return fmt.Errorf("evict %s from the page cache: %w", path, err)
	}
	return nil
}
