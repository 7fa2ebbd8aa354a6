package bpf

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
)

// bpffsMount is where the BPF filesystem is mounted when it is not yet.
const bpffsMount = "/sys/fs/bpf"

// ensureBPFFS makes sure root can hold pins: it is created on a BPF
// filesystem, which is mounted at /sys/fs/bpf first when root lies there
// and nothing is mounted yet (a fresh machine). Concurrent callers mount
// it once: the check and the mount happen under a lock on the mount point.
func ensureBPFFS(root string) error {
	root = filepath.Clean(root)
	if root == bpffsMount || strings.HasPrefix(root, bpffsMount+"/") {
		if err := mountBPFFS(); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return fmt.Errorf("pin dir: %w", err)
	}
	if !isBPFFS(root) {
		return fmt.Errorf("pin dir %s: not on a BPF filesystem (mount -t bpf bpf DIR)", root)
	}
	return nil
}

// CheckPinRoot refuses a pin root that could hold no pins, and creates
// nothing: one neither under /sys/fs/bpf (where ensureBPFFS mounts
// bpffs) nor on a BPF filesystem mounted elsewhere. A root that does not
// exist yet is judged by the nearest directory above it that does, the one
// it would be made on. "" pins nothing and is fine. Errors wrap
// lineage.ErrInvalid.
func CheckPinRoot(root string) error {
	if root == "" {
		return nil
	}
	if !filepath.IsAbs(root) {
		return fmt.Errorf("%w option: pin dir %q: want an absolute path", lineage.ErrInvalid, root)
	}
	root = filepath.Clean(root)
	if root == bpffsMount || strings.HasPrefix(root, bpffsMount+"/") {
		return nil
	}
	dir := root
	for {
		_, err := os.Stat(dir)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("pin dir %s: %w", root, err)
		}
		dir = filepath.Dir(dir)
	}
	if !isBPFFS(dir) {
		return fmt.Errorf("%w option: pin dir %s: not on a BPF filesystem: pick a directory under %s or on a bpffs mount (mount -t bpf bpf DIR)", lineage.ErrInvalid, root, bpffsMount)
	}
	return nil
}

func isBPFFS(path string) bool {
	var st unix.Statfs_t
	return unix.Statfs(path, &st) == nil && st.Type == unix.BPF_FS_MAGIC
}

func mountBPFFS() error {
	if isBPFFS(bpffsMount) {
		return nil
	}
	lock, err := lockDir(bpffsMount, true)
	if err != nil {
		return fmt.Errorf("mount bpffs: %w", err)
	}
	defer lock.Close()
	// Checked again under the lock: another process may have mounted it.
	if isBPFFS(bpffsMount) {
		return nil
	}
	if err := unix.Mount("bpf", bpffsMount, "bpf", 0, "mode=0700"); err != nil {
		return fmt.Errorf("mount bpffs at %s: %w", bpffsMount, err)
	}
	return nil
}

// lockDir takes an exclusive lock on the directory dir, held until the
// returned file is closed. With wait false, it fails at once, wrapping
// unix.EWOULDBLOCK, when another process holds the lock.
func lockDir(dir string, wait bool) (*os.File, error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	how := unix.LOCK_EX
	if !wait {
		how |= unix.LOCK_NB
	}
	if err := unix.Flock(int(d.Fd()), how); err != nil {
		d.Close()
		return nil, fmt.Errorf("lock %s: %w", dir, err)
	}
	return d, nil
}
