package job

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// ReportFile is where the JSON report goes, pinned before the job starts:
// its directory is opened then, and the file is later created relative to
// that descriptor, so nothing the job plants meanwhile (a symlink in place
// of the file or of a parent directory) can redirect it. Writing replaces
// the file atomically, never following a symlink, and gives it to the
// invoking user with mode 0644.
type ReportFile struct {
	dir  *os.File
	base string
	uid  int
	gid  int
}

// OpenReportFile pins path's directory. A path that names something other
// than a regular file now (a symlink such as /dev/stdout, a device) is
// refused. The invoking user is SUDO_UID and
// SUDO_GID from getenv when set, else lineage's own real uid and gid.
// Errors for a path that names no file wrap [lineage.ErrInvalid].
func OpenReportFile(path string, getenv func(string) string) (*ReportFile, error) {
	base := filepath.Base(path)
	if path == "" || base == "." || base == ".." || base == "/" {
		return nil, fmt.Errorf("%w report file %q: not a file name", lineage.ErrInvalid, path)
	}
	fd, err := unix.Open(filepath.Dir(path), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("report file %s: open directory: %w", path, err)
	}
	var st unix.Stat_t
	if err := unix.Fstatat(fd, base, &st, unix.AT_SYMLINK_NOFOLLOW); err == nil && st.Mode&unix.S_IFMT != unix.S_IFREG {
		// Replacing a symlink the user named (/dev/stdout) or a device
		// is never what they meant; one the job plants later is replaced.
		_ = unix.Close(fd)
		return nil, fmt.Errorf("%w report file %s: exists and is not a regular file", lineage.ErrInvalid, path)
	}
	f := &ReportFile{dir: os.NewFile(uintptr(fd), filepath.Dir(path)), base: base, uid: os.Getuid(), gid: os.Getgid()}
	if uid, err := strconv.Atoi(getenv("SUDO_UID")); err == nil && uid >= 0 {
		f.uid = uid
		f.gid = uid
		if gid, err := strconv.Atoi(getenv("SUDO_GID")); err == nil && gid >= 0 {
			f.gid = gid
		}
	}
	return f, nil
}

// Close releases the directory.
func (f *ReportFile) Close() error { return f.dir.Close() }

// Write writes r as indented JSON to a new file beside the target, then
// renames it over the target: a reader sees the old report or the whole
// new one.
func (f *ReportFile) Write(r *Report) error {
	r.Version = ReportVersion
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	dirfd := int(f.dir.Fd())
	tmp := fmt.Sprintf(".%s.%d.tmp", f.base, os.Getpid())
	fd, err := unix.Openat(dirfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", tmp, err)
	}
	out := os.NewFile(uintptr(fd), tmp)
	err = writeOwned(out, append(data, '\n'), f.uid, f.gid)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = unix.Renameat(dirfd, tmp, dirfd, f.base)
	}
	if err != nil {
		_ = unix.Unlinkat(dirfd, tmp, 0)
		return fmt.Errorf("write %s: %w", f.base, err)
	}
	return nil
}

func writeOwned(out *os.File, data []byte, uid, gid int) error {
	if uid != os.Geteuid() || gid != os.Getegid() {
		if err := out.Chown(uid, gid); err != nil {
			return fmt.Errorf("give it to uid %d: %w", uid, err)
		}
	}
	if err := out.Chmod(0o644); err != nil {
		return err
	}
	if _, err := out.Write(data); err != nil {
		return err
	}
	return out.Sync()
}
