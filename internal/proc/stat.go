package proc

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// ReadStat reads and parses root/PID/stat (root is "/proc" on a real system).
// It wraps [lineage.ErrNoProcess] when the process does not exist.
func ReadStat(root string, pid int) (lineage.Stat, error) {
	data, err := ReadFile(root + "/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return lineage.Stat{}, noProcess(pid, err)
	}
	return lineage.ParseStat(pid, data, "")
}

// ReadFile reads the small file at path (a /proc file) whole, with three
// system calls (open, read, close) where os.ReadFile makes eight: it
// doesn't size the buffer with fstat, nor offer the file to the poller,
// which refuses /proc files (epoll_ctl and four fcntl calls a file). A
// daemon reads several of them at every registration.
func ReadFile(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	buf := make([]byte, 0, 1024)
	for {
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return nil, &os.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			return buf, nil
		}
		buf = buf[:len(buf)+n]
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
	}
}

// Self returns the calling process's identity, from /proc.
func Self() (lineage.Identity, error) {
	st, err := ReadStat("/proc", os.Getpid())
	if err != nil {
		return lineage.Identity{}, err
	}
	return st.Identity, nil
}

// CheckStat returns nil when st, the stat just read for id's pid, shows id
// alive: not a zombie, and started exactly when id says. It wraps
// [lineage.ErrNoProcess] or [lineage.ErrIdentityMismatch] otherwise.
func CheckStat(st lineage.Stat, id lineage.Identity) error {
	if st.StartTicks != id.StartTicks {
		return fmt.Errorf("pid %d started at %d, not %d: %w", id.PID, st.StartTicks, id.StartTicks, lineage.ErrIdentityMismatch)
	}
	if st.Zombie() {
		return fmt.Errorf("pid %d has exited (zombie): %w", id.PID, lineage.ErrNoProcess)
	}
	return nil
}

// midExecWait bounds how long [ReadArgv] waits for a process in the middle
// of an exec to show its new command line.
const midExecWait = 50 * time.Millisecond

// ReadArgv returns the command line of pid under root (empty for kernel
// threads and zombies), at most lineage.MaxArgvBytes of it: a longer one
// is cut and marked (lineage.ArgvFromCmdline), and never read whole. For a
// process whose leader thread has exited while others run on, it is read
// through one of the live threads.
//
// A process in the middle of an exec shows no command line: from the
// moment the kernel gives it its new address space until it has laid out
// the new program's arguments, /proc reads empty (a millisecond or so).
// ReadArgv waits that out, for up to 50 ms, so that a process that is
// merely being exec'd (a `setsid` becoming its program) is never named by
// nothing. Only such a process is waited for: one whose stat shows its
// arguments laid out (an empty command line it chose, such as bounds set to
// nothing) is not, nor a kernel thread, nor one exiting. A reader that may
// not inspect the process sees no bounds, and waits.
func ReadArgv(root string, pid int) ([]string, error) {
	dir := filepath.Join(root, strconv.Itoa(pid))
	deadline := time.Now().Add(midExecWait)
	laidOut := false
	for pause := 100 * time.Microsecond; ; pause = min(2*pause, 5*time.Millisecond) {
		raw, err := readCmdline(dir)
		if err != nil {
			return nil, noProcess(pid, err)
		}
		if len(raw) > 0 || laidOut || !time.Now().Before(deadline) {
			return lineage.ArgvFromCmdline(raw), nil
		}
		st, err := ReadStat(root, pid)
		if err != nil || st.Kernel || st.Exiting || st.Zombie() {
			return nil, nil
		}
		if st.ArgEnd != 0 {
			// Laid out by now, if not at the read above: read once more.
			laidOut = true
			continue
		}
		time.Sleep(pause)
	}
}

// readCmdline reads the cmdline of the process at dir, through one of its
// live threads when its leader thread has exited.
func readCmdline(dir string) ([]byte, error) {
	raw, err := readCapped(filepath.Join(dir, "cmdline"), lineage.MaxArgvBytes+1)
	if err != nil || len(raw) > 0 {
		return raw, err
	}
	tasks, _ := os.ReadDir(filepath.Join(dir, "task"))
	for _, t := range tasks {
		if r, err := readCapped(filepath.Join(dir, "task", t.Name(), "cmdline"), lineage.MaxArgvBytes+1); err == nil && len(r) > 0 {
			return r, nil
		}
	}
	return raw, nil
}

// readCapped reads at most limit bytes of the file at path.
func readCapped(path string, limit int) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, int64(limit)))
}

// noProcess wraps err for pid, as [lineage.ErrNoProcess] when the process
// is gone.
func noProcess(pid int, err error) error {
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("pid %d: %w", pid, lineage.ErrNoProcess)
	}
	return fmt.Errorf("pid %d: %w", pid, err)
}

// PIDMax reads the kernel's pid_max under the /proc mounted at root: no
// more processes than that can be alive at once.
func PIDMax(root string) (uint32, error) {
	b, err := os.ReadFile(filepath.Join(root, "sys/kernel/pid_max"))
	if err != nil {
		return 0, fmt.Errorf("read pid_max: %w", err)
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 32)
	if err != nil {
		return 0, fmt.Errorf("read pid_max: %w", err)
	}
	return uint32(n), nil
}
