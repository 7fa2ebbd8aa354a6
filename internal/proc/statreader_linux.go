package proc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"github.com/lineage-dev/lineage/lineage"
)

// StatReader reads /proc/PID/stat for a poller that reads it for every
// process, many times a second. It returns what [FS.Stat] returns, and
// field 52 besides, at a fraction of the cost: it lists /proc with getdents
// into a buffer it keeps, reads each stat with one pread, and parses only the
// fields lineage uses (procfs stats the directory, opens, reads through
// io.ReadAll, closes, and runs fmt.Fscan over every field).
//
// [StatReader.Scan] can also keep a process's stat file open from one scan
// to the next, so that a scan costs one pread for it rather than an open, a
// read and a close: every process's, or, once [StatReader.KeepOpen] is set,
// only those it chooses (each open file holds a page of kernel memory,
// charged to the reader's cgroup: keeping every process's open on a host of
// 50,000 costs about 200 MB). An open stat file stays bound to its process:
// once the process is reaped it reads ESRCH, never the stat of a later
// process that got the same pid ([StatReader.ReadOpen] reads through it). It
// holds at most half the soft RLIMIT_NOFILE (and no more than 65536) such
// descriptors, all close-on-exec; past that, and on a tree that is not a
// procfs mount (a test's fake tree), it opens and closes as
// [StatReader.Stat] does. Close releases them.
//
// A StatReader is not safe for concurrent use: it reuses its buffers. Make
// one per goroutine with [FS.StatReader].
type StatReader struct {
	dir     string
	buf     []byte
	dents   []byte
	open    map[int]openStat
	gen     uint64
	maxOpen int
	keep    func(lineage.Stat) bool
}

// KeepOpen has Scan keep open the stat files of the processes for which
// keep returns true, and close the others after reading them; nil keeps
// every one open.
func (r *StatReader) KeepOpen(keep func(lineage.Stat) bool) { r.keep = keep }

// ReadOpen reads pid's stat through the file kept open for it, which names
// the process it was opened for even if that process is gone and its pid
// reused. It reports false when no file is open for pid. It wraps
// ErrNoProcess when that process has been reaped.
func (r *StatReader) ReadOpen(pid int) (lineage.Stat, bool, error) {
	o, ok := r.open[pid]
	if !ok {
		return lineage.Stat{}, false, nil
	}
	st, err := r.readFD(pid, o.fd, o.comm)
	return st, true, err
}

// maxKeptOpen caps the stat files a StatReader keeps open between scans.
const maxKeptOpen = 65536

// procSuperMagic is the f_type of a procfs mount (PROC_SUPER_MAGIC).
const procSuperMagic = 0x9fa0

type openStat struct {
	fd  int
	gen uint64
	// comm is the name last read, reused while it stays the same.
	comm string
}

// StatReader returns a reader of the same /proc tree.
func (p FS) StatReader() *StatReader {
	// Keep files open only on a real procfs: a file in a fake tree would
	// go on reading a process that the test has replaced.
	maxOpen := 0
	var lim syscall.Rlimit
	var fs syscall.Statfs_t
	if syscall.Statfs(p.root, &fs) == nil && fs.Type == procSuperMagic &&
		syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim) == nil {
		maxOpen = int(min(lim.Cur/2, maxKeptOpen))
	}
	return &StatReader{
		dir:     p.root,
		buf:     make([]byte, 1024),
		dents:   make([]byte, 32<<10),
		open:    make(map[int]openStat),
		maxOpen: maxOpen,
	}
}

// Stat reads /proc/PID/stat. It wraps ErrNoProcess when pid is gone.
func (r *StatReader) Stat(pid int) (lineage.Stat, error) {
	if o, ok := r.open[pid]; ok {
		if st, err := r.readFD(pid, o.fd, o.comm); err == nil || !errors.Is(err, lineage.ErrNoProcess) {
			return st, err
		}
		r.drop(pid)
	}
	fd, err := r.openStat(pid)
	if err != nil {
		return lineage.Stat{}, err
	}
	defer syscall.Close(fd)
	return r.readFD(pid, fd, "")
}

// Scan lists every process and hands each one's stat to fn, in the order of
// the listing. A process that can't be read for another reason than being
// gone is handed to failed, if not nil. Scan returns how many processes it
// listed.
func (r *StatReader) Scan(fn func(lineage.Stat), failed func(pid int, err error)) (int, error) {
	r.gen++
	n := 0
	err := r.list(func(pid int) {
		n++
		st, err := r.scanOne(pid)
		switch {
		case err == nil:
			fn(st)
		case failed != nil && !errors.Is(err, lineage.ErrNoProcess):
			failed(pid, err)
		}
	})
	// Close what belongs to processes no longer listed.
	for pid, o := range r.open {
		if o.gen != r.gen {
			r.drop(pid)
		}
	}
	return n, err
}

func (r *StatReader) scanOne(pid int) (lineage.Stat, error) {
	if o, ok := r.open[pid]; ok {
		st, err := r.readFD(pid, o.fd, o.comm)
		if err == nil {
			if r.keep != nil && !r.keep(st) {
				r.drop(pid)
			} else {
				r.open[pid] = openStat{fd: o.fd, gen: r.gen, comm: st.Comm}
			}
			return st, nil
		}
		// That process is gone; the pid may now be another's.
		r.drop(pid)
		if !errors.Is(err, lineage.ErrNoProcess) {
			return lineage.Stat{}, err
		}
	}
	fd, err := r.openStat(pid)
	if err != nil {
		return lineage.Stat{}, err
	}
	st, err := r.readFD(pid, fd, "")
	if err != nil || len(r.open) >= r.maxOpen || (r.keep != nil && !r.keep(st)) {
		syscall.Close(fd)
		return st, err
	}
	r.open[pid] = openStat{fd: fd, gen: r.gen, comm: st.Comm}
	return st, nil
}

func (r *StatReader) openStat(pid int) (int, error) {
	fd, err := syscall.Open(r.dir+"/"+strconv.Itoa(pid)+"/stat", syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return -1, noProcess(pid, err)
	}
	return fd, nil
}

// readFD reads a whole stat record from fd. The kernel fills the record in
// one read when the buffer is big enough; a short read is the end of the
// file, here as for a regular file in a fake tree. A name equal to comm is
// returned as comm, without allocating.
func (r *StatReader) readFD(pid, fd int, comm string) (lineage.Stat, error) {
	for {
		n, err := syscall.Pread(fd, r.buf, 0)
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return lineage.Stat{}, noProcess(pid, err)
		case n == len(r.buf):
			r.buf = make([]byte, 2*len(r.buf))
			continue
		}
		return lineage.ParseStat(pid, r.buf[:n], comm)
	}
}

func (r *StatReader) drop(pid int) {
	if o, ok := r.open[pid]; ok {
		syscall.Close(o.fd)
		delete(r.open, pid)
	}
}

// Close closes the stat files Scan keeps open. The reader stays usable.
func (r *StatReader) Close() error {
	for pid := range r.open {
		r.drop(pid)
	}
	return nil
}

// PIDs lists the pids of all processes, as [FS.PIDs] does, appending
// them to dst[:0].
func (r *StatReader) PIDs(dst []int) ([]int, error) {
	dst = dst[:0]
	err := r.list(func(pid int) { dst = append(dst, pid) })
	return dst, err
}

// list calls fn with every pid in the proc root, read with getdents into a
// buffer it keeps.
func (r *StatReader) list(fn func(pid int)) error {
	fd, err := syscall.Open(r.dir, syscall.O_RDONLY|syscall.O_DIRECTORY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("list processes: %w", err)
	}
	defer syscall.Close(fd)
	for {
		n, err := syscall.ReadDirent(fd, r.dents)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return fmt.Errorf("list processes: %w", err)
		}
		if n <= 0 {
			return nil
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8,
		// then the name, NUL-terminated.
		for off := 0; off+19 < n; {
			reclen := int(binary.NativeEndian.Uint16(r.dents[off+16:]))
			if reclen == 0 || off+reclen > n {
				break
			}
			if pid, ok := parsePID(r.dents[off+19 : off+reclen]); ok {
				fn(pid)
			}
			off += reclen
		}
	}
}

// eachStat hands the stat of every live process to fn, read by a lean
// reader that keeps no file open: a pass of adoption over /proc.
func (p FS) eachStat(fn func(lineage.Stat)) error {
	r := p.StatReader()
	defer r.Close()
	r.KeepOpen(func(lineage.Stat) bool { return false })
	_, err := r.Scan(fn, nil)
	return err
}
