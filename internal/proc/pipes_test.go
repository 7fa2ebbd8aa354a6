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

// This process's own pipe is found by its inode, both ends, and a pipe not
// asked about is not.
func TestFDLinksOfARealProcess(t *testing.T) {
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
	link := PipeLink(pipeIno(t, r))
	fds, truncated, err := p.FDLinks(os.Getpid(), map[string]bool{link: true}, 4096)
	if err != nil || truncated {
		t.Fatalf("FDLinks: %v, truncated %v", err, truncated)
	}
	want := []FDLink{{int(r.Fd()), link}, {int(w.Fd()), link}}
	slices.SortFunc(want, func(a, b FDLink) int { return a.FD - b.FD })
	if !slices.Equal(fds, want) {
		t.Errorf("FDLinks = %v, want %v (the other pipe is %s)", fds, want, PipeLink(pipeIno(t, or)))
	}
	if _, _, err := p.FDLinks(1<<30, map[string]bool{link: true}, 10); err == nil {
		t.Error("FDLinks of a pid that doesn't exist: no error")
	}
}

// A fake tree: links not asked about, or not numbered, are skipped, and
// the read stops at max descriptors, saying so.
func TestFDLinksReadsAtMostMax(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "42", "fd")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, link := range map[string]string{
		"0": "pipe:[7]", "1": "socket:[8]", "2": "/dev/null", "3": "socket:[7]", "4": "pipe:[7", "x": "pipe:[7]",
	} {
		if err := os.Symlink(link, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	p := FS{root: root}
	fds, truncated, err := p.FDLinks(42, map[string]bool{PipeLink(7): true, SocketLink(8): true}, 100)
	if err != nil || truncated {
		t.Fatalf("FDLinks: %v, truncated %v", err, truncated)
	}
	if want := []FDLink{{0, "pipe:[7]"}, {1, "socket:[8]"}}; !slices.Equal(fds, want) {
		t.Errorf("FDLinks = %v, want %v", fds, want)
	}
	if _, truncated, _ := p.FDLinks(42, map[string]bool{PipeLink(7): true}, 3); !truncated {
		t.Error("6 links read with max 3: not truncated")
	}
}
