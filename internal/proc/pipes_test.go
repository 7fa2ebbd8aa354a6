package proc

import (
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
)

func pipeIno(t *testing.T, f *os.File) uint64 {
	t.Helper()
	var st syscall.Stat_t
	if err := syscall.Fstat(int(f.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// This process's own pipes are found by inode, both ends, and a pipe not
// asked about is not.
func TestPipesOfARealProcess(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	or, ow, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer or.Close()
	defer ow.Close()
	p, err := Open("/proc")
	if err != nil {
		t.Fatal(err)
	}
	ino := pipeIno(t, r)
	fds, truncated, err := p.Pipes(os.Getpid(), map[uint64]bool{ino: true}, 4096)
	if err != nil || truncated {
		t.Fatalf("Pipes: %v, truncated %v", err, truncated)
	}
	want := []PipeFD{{int(r.Fd()), ino}, {int(w.Fd()), ino}}
	slices.SortFunc(want, func(a, b PipeFD) int { return a.FD - b.FD })
	if !slices.Equal(fds, want) {
		t.Errorf("Pipes = %v, want %v (the other pipe is %d)", fds, want, pipeIno(t, or))
	}
	if _, _, err := p.Pipes(1<<30, map[uint64]bool{ino: true}, 10); err == nil {
		t.Error("Pipes of a pid that doesn't exist: no error")
	}
}

// A fake tree: links that are not pipes, or not numbered, are skipped, and
// the read stops at max descriptors, saying so.
func TestPipesReadsAtMostMax(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "42", "fd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, link := range map[string]string{
		"0": "pipe:[7]", "1": "pipe:[8]", "2": "/dev/null", "3": "socket:[7]", "4": "pipe:[7", "x": "pipe:[7]",
	} {
		if err := os.Symlink(link, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	p := FS{root: root}
	fds, truncated, err := p.Pipes(42, map[uint64]bool{7: true, 8: true}, 100)
	if err != nil || truncated {
		t.Fatalf("Pipes: %v, truncated %v", err, truncated)
	}
	if want := []PipeFD{{0, 7}, {1, 8}}; !slices.Equal(fds, want) {
		t.Errorf("Pipes = %v, want %v", fds, want)
	}
	if _, truncated, _ := p.Pipes(42, map[uint64]bool{7: true}, 3); !truncated {
		t.Error("6 links read with max 3: not truncated")
	}
}
