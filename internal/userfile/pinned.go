package userfile

import (
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/lineage"
)

// Pinned is a file to be written later, its directory opened now: the file
// is created relative to that descriptor, so nothing planted meanwhile (a
// symlink in place of the file or of a parent directory) can redirect it.
// Use it for what lineage writes after a job ran, which the job could
// otherwise aim elsewhere.
type Pinned struct {
	dir   *os.File
	base  string
	owner Owner
}

// Pin opens path's directory for owner. A path that names something other
// than a regular file now (a symlink such as /dev/stdout, a device) is
// refused, wrapping lineage.ErrInvalid, as is one that names no file.
func Pin(path string, owner Owner) (*Pinned, error) {
	base := filepath.Base(path)
	if path == "" || base == "." || base == ".." || base == "/" {
		return nil, fmt.Errorf("%w file %q: names no file", lineage.ErrInvalid, path)
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%s: open directory: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		// Replacing a symlink the user named (/dev/stdout) or a device
		// is never what they meant; one planted later is replaced.
		_ = unix.Close(fd)
		return nil, fmt.Errorf("%w file %s: exists and is not a regular file", lineage.ErrInvalid, path)
	}
	return &Pinned{dir: os.NewFile(uintptr(fd), filepath.Dir(path)), base: base, owner: owner}, nil
}

// Close releases the directory.
func (p *Pinned) Close() error { return p.dir.Close() }

// Replace writes data to a new file beside the target, owned by the owner
// with mode perm, then renames it over the target: a reader sees the old
// file or the whole new one, and a symlink at the target is replaced, never
// followed.
func (p *Pinned) Replace(data []byte, perm os.FileMode) error {
	dirfd := int(p.dir.Fd())
	tmp := fmt.Sprintf(".%s.%d.tmp", p.base, os.Getpid())
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	out := os.NewFile(uintptr(fd), tmp)
	err = writeOwned(out, data, p.owner, perm)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, p.base)
	}
	if err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return fmt.Errorf("write %s: %w", p.base, err)
	}
	return nil
}

func writeOwned(out *os.File, data []byte, owner Owner, perm os.FileMode) error {
	if owner.UID != os.Geteuid() || owner.GID != os.Getegid() {
		if err := out.Chown(owner.UID, owner.GID); err != nil {
			return fmt.Errorf("give it to uid %d: %w", owner.UID, err)
		}
	}
	if err := out.Chmod(perm); err != nil {
		return err
	}
	if _, err := out.Write(data); err != nil {
		return err
	}
	return out.Sync()
}
