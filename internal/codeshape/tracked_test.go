package codeshape

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxTrackedBytes bounds a file in the repository: the largest are the
// BPF objects and the docs' screenshots, about 100 KiB each.
const maxTrackedBytes = 1 << 20

// TestNoBuiltBinaryIsTracked keeps built programs out of git: an ELF file
// may be tracked only as a committed BPF object (internal/loader/bpf/*.o),
// and no file past maxTrackedBytes. It reads what git tracks; outside a git
// checkout (a source tarball) there is nothing to check.
func TestNoBuiltBinaryIsTracked(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, ".git")); err != nil {
		t.Skip("not a git checkout: nothing tracked to check")
	}
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		path := filepath.Join(root, name)
		info, err := os.Lstat(path)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the work tree, or a link
		}
		if info.Size() > maxTrackedBytes {
			t.Errorf("%s is %d bytes, over %d: a built file?", name, info.Size(), maxTrackedBytes)
		}
		head := make([]byte, 4)
		f, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := f.Read(head)
		f.Close()
		bpfObject := filepath.Dir(name) == "internal/loader/bpf" && strings.HasSuffix(name, ".o")
		if bytes.Equal(head[:n], []byte("\x7fELF")) && !bpfObject {
			t.Errorf("%s is a built program: build it, don't commit it", name)
		}
	}
}
