package proc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/lineage-dev/lineage/lineage"
)

// fakeStat returns a /proc/PID/stat record with the fields lineage reads set
// and the others plausible, in the kernel's format.
func fakeStat(pid int, comm, state string, ppid, pgrp, session int, flags uint, start, stack uint64, exit int) string {
	f := make([]string, 53)
	for i := range f {
		f[i] = "0"
	}
	f[1] = fmt.Sprint(pid)
	f[2] = "(" + comm + ")"
	f[3] = state
	f[4], f[5], f[6] = fmt.Sprint(ppid), fmt.Sprint(pgrp), fmt.Sprint(session)
	f[7], f[8] = "34816", "-1"
	f[9] = fmt.Sprint(flags)
	f[18], f[19], f[20] = "20", "0", "1"
	f[22] = fmt.Sprint(start)
	f[23] = "8716288"
	f[25] = "18446744073709551615"
	f[28] = fmt.Sprint(stack)
	f[52] = fmt.Sprint(exit)
	return strings.Join(f[1:], " ") + "\n"
}

func writeFakeProc(t *testing.T, root string, pid int, stat string) {
	t.Helper()
	dir := filepath.Join(root, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(stat), 0o644); err != nil {
		t.Fatal(err)
	}
}

// statsAgree compares what the two parsers both read (procfs skips fields
// 33, 34, 49 and 52).
func statsAgree(a, b lineage.Stat) bool {
	a.ExitCode, b.ExitCode = 0, 0
	a.SigIgnore, b.SigIgnore, a.SigCatch, b.SigCatch = 0, 0, 0, 0
	a.ArgEnd, b.ArgEnd = 0, 0
	return a == b
}

func TestStatReaderAgreesWithProcfsOnFakeTree(t *testing.T) {
	root := t.TempDir()
	records := map[int]string{
		100: fakeStat(100, "sh", "S", 1, 100, 100, 0x400000, 5000, 0x7ffc1234, 0),
		101: fakeStat(101, "a (weird) name)", "R", 100, 100, 100, 0, 5001, 0x7ffd0000, 0),
		102: fakeStat(102, "with space", "Z", 100, 101, 100, 0, 5002, 0, 0x9),
		2:   fakeStat(2, "kthreadd", "S", 0, 0, 0, pfKthread|0x40, 19, 0, 0),
	}
	for pid, rec := range records {
		writeFakeProc(t, root, pid, rec)
	}
	p, err := Open(root)
	if err != nil {
		t.Fatal(err)
	}
	r := p.StatReader()
	for pid := range records {
		want, err := p.procfsStat(pid)
		if err != nil {
			t.Fatalf("procfs: %v", err)
		}
		got, err := r.Stat(pid)
		if err != nil {
			t.Fatalf("lean: %v", err)
		}
		if !statsAgree(want, got) {
			t.Errorf("pid %d:\nprocfs %+v\nlean   %+v", pid, want, got)
		}
	}
	if st, _ := r.Stat(102); st.ExitCode != 0x9 || st.State != "Z" {
		t.Errorf("zombie: got state %q exit %#x, want Z 0x9", st.State, st.ExitCode)
	}
	if st, _ := r.Stat(2); !st.Kernel {
		t.Errorf("kthreadd not seen as a kernel thread")
	}
	if _, err := r.Stat(999); !errors.Is(err, lineage.ErrNoProcess) {
		t.Errorf("missing pid: got %v, want lineage.ErrNoProcess", err)
	}
	pids, err := r.PIDs(nil)
	if err != nil || len(pids) != len(records) {
		t.Errorf("PIDs: got %v, %v", pids, err)
	}
	// Scan reads the same, and keeps the files open.
	scanned := map[int]lineage.Stat{}
	n, err := r.Scan(func(st lineage.Stat) { scanned[int(st.PID)] = st }, nil)
	if err != nil || n != len(records) || len(scanned) != len(records) {
		t.Fatalf("scan: %d listed, %d read, %v", n, len(scanned), err)
	}
	for pid := range records {
		want, _ := p.procfsStat(pid)
		if !statsAgree(want, scanned[pid]) {
			t.Errorf("scan of pid %d:\nprocfs %+v\nscan   %+v", pid, want, scanned[pid])
		}
	}
	// Not a procfs mount: nothing is kept open, and a process replaced in
	// the tree is read afresh.
	if len(r.open) != 0 {
		t.Errorf("%d files kept open in a fake tree", len(r.open))
	}
	if err := os.RemoveAll(filepath.Join(root, "101")); err != nil {
		t.Fatal(err)
	}
	writeFakeProc(t, root, 101, fakeStat(101, "stranger", "S", 1, 101, 101, 0, 9000, 1, 0))
	if st, err := r.Stat(101); err != nil || st.StartTicks != 9000 {
		t.Errorf("replaced process: %+v, %v", st, err)
	}
}

// Scan's kept-open files stay bound to their process: once it is reaped, the
// file reads ESRCH and Scan reads whatever has the pid now, afresh.
func TestStatReaderScanFollowsProcessesNotPids(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	p, err := Open("/proc")
	if err != nil {
		t.Fatal(err)
	}
	r := p.StatReader()
	defer r.Close()
	pid := cmd.Process.Pid
	find := func() (lineage.Stat, bool) {
		var got lineage.Stat
		found := false
		if _, err := r.Scan(func(st lineage.Stat) {
			if int(st.PID) == pid {
				got, found = st, true
			}
		}, func(pid int, err error) { t.Errorf("pid %d: %v", pid, err) }); err != nil {
			t.Fatal(err)
		}
		return got, found
	}
	st, ok := find()
	if !ok || st.Comm != "sleep" || st.State == "Z" {
		t.Fatalf("sleeper: %+v, %v", st, ok)
	}
	if _, ok := r.open[pid]; !ok {
		t.Fatalf("sleeper's stat not kept open")
	}
	fd := r.open[pid].fd
	listed := len(r.open)
	_ = cmd.Process.Kill()
	// Unreaped, it is a zombie, read through the same file.
	for i := 0; ; i++ {
		st, ok = find()
		if !ok || st.State == "Z" || i > 200 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	if !ok || st.State != "Z" || st.ExitCode != 9 || r.open[pid].fd != fd {
		t.Errorf("zombie: %+v (found %v), want state Z, exit code 9, through the same file", st, ok)
	}
	_ = cmd.Wait()
	if _, err := r.readFD(pid, fd, ""); !errors.Is(err, lineage.ErrNoProcess) {
		t.Errorf("reaped process's kept file: %v, want lineage.ErrNoProcess", err)
	}
	if _, ok := find(); ok {
		t.Errorf("a reaped process was still found")
	}
	if _, ok := r.open[pid]; ok {
		t.Errorf("a reaped process's file is still open")
	}
	r.Close()
	if len(r.open) != 0 || listed < 2 {
		t.Errorf("%d files open after Close (%d before)", len(r.open), listed)
	}
}

func TestStatReaderAgreesWithProcfsOnRealProc(t *testing.T) {
	p, err := Open("/proc")
	if err != nil {
		t.Fatal(err)
	}
	r := p.StatReader()
	pids, err := r.PIDs(nil)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := p.procfsPIDs()
	if len(pids) == 0 || len(want) == 0 {
		t.Fatalf("no processes listed: lean %d, procfs %d", len(pids), len(want))
	}
	compared, readable := 0, 0
	for _, pid := range pids {
		ok, agreed, a, b := compareStat(p, r, pid)
		if !ok {
			continue // gone
		}
		readable++
		if a == (lineage.Stat{}) {
			continue // changing too fast to compare
		}
		compared++
		if !agreed {
			t.Errorf("pid %d:\nprocfs %+v\nlean   %+v", pid, a, b)
		}
	}
	if compared < readable/2 {
		t.Errorf("compared only %d of %d processes", compared, readable)
	}
	self, err := r.Stat(os.Getpid())
	if err != nil || self.StartStack == 0 || self.State == "" {
		t.Errorf("own stat: %+v, %v", self, err)
	}
}

// compareStat reads pid each way, the lean read between two procfs reads,
// up to three times: a process that changed in between (it exec'd, it was
// reparented, it went from running to sleeping and back) is read again,
// so that only a disagreement seen twice with stable procfs reads counts.
// It reports whether pid could be read at all and whether the lean read
// agreed; a is zero when the process changed too often to tell.
func compareStat(p FS, r *StatReader, pid int) (ok, agreed bool, a, b lineage.Stat) {
	var stable lineage.Stat
	disagreements := 0
	for range 3 {
		a1, err1 := p.procfsStat(pid)
		lean, err2 := r.Stat(pid)
		a2, err3 := p.procfsStat(pid)
		if err1 != nil || err2 != nil || err3 != nil {
			return false, false, lineage.Stat{}, lineage.Stat{}
		}
		if !statsAgree(a1, a2) {
			continue
		}
		if statsAgree(a1, lean) {
			return true, true, a1, lean
		}
		stable, b = a1, lean
		disagreements++
	}
	if disagreements < 2 {
		return true, false, lineage.Stat{}, lineage.Stat{}
	}
	return true, false, stable, b
}

func TestParseStatRejectsMalformed(t *testing.T) {
	for _, rec := range []string{
		"",
		"12 (sh",
		"12 (sh) S 1 2 3",
		"12 (sh) S x 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 500",
		"12 (sh)",
	} {
		if _, err := lineage.ParseStat(12, []byte(rec), ""); !errors.Is(err, lineage.ErrMalformedStat) {
			t.Errorf("%q: got %v, want a malformed-stat error", rec, err)
		}
	}
	// An old kernel's record, without the later fields, is fine.
	st, err := lineage.ParseStat(12, []byte("12 (sh) S 1 12 12 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 500"), "")
	if err != nil || st.StartTicks != 500 || st.PPID != 1 {
		t.Errorf("short record: %+v, %v", st, err)
	}
}

func FuzzParseStat(f *testing.F) {
	f.Add([]byte(fakeStat(100, "sh", "S", 1, 100, 100, 0, 5000, 1, 0)))
	f.Add([]byte(fakeStat(7, ") (", "Z", 1, 1, 1, 0, 1, 0, 9)))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := lineage.ParseStat(1, data, "")
		if err == nil && st.PID != 1 {
			t.Fatalf("pid not kept: %+v", st)
		}
	})
}

// BenchmarkStat reads every process's stat, side by side: with procfs; with
// the lean reader, one Stat at a time (open, pread, close) and by Scan
// (files kept open: one pread each; ns/proc); and with os.Open and Read,
// without parsing. ns/op is per process except for Scan.
func BenchmarkStat(b *testing.B) {
	p, err := Open("/proc")
	if err != nil {
		b.Fatal(err)
	}
	pids, err := p.PIDs()
	if err != nil {
		b.Fatal(err)
	}
	b.Run("procfs", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			_, _ = p.procfsStat(pids[i%len(pids)])
		}
	})
	b.Run("lean", func(b *testing.B) {
		b.ReportAllocs()
		r := p.StatReader()
		for i := 0; b.Loop(); i++ {
			_, _ = r.Stat(pids[i%len(pids)])
		}
	})
	b.Run("lean-kept-open", func(b *testing.B) {
		// Scan, per process listed: one pread each.
		b.ReportAllocs()
		r := p.StatReader()
		defer r.Close()
		n, _ := r.Scan(func(lineage.Stat) {}, nil)
		scans := 0
		for b.Loop() {
			n, _ = r.Scan(func(lineage.Stat) {}, nil)
			scans++
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n*scans), "ns/proc")
	})
	b.Run("os-open-read-close", func(b *testing.B) {
		// No parse: os.Open, one Read, Close.
		buf := make([]byte, 1024)
		for i := 0; b.Loop(); i++ {
			f, err := os.Open(fmt.Sprintf("/proc/%d/stat", pids[i%len(pids)]))
			if err == nil {
				_, _ = f.Read(buf)
				f.Close()
			}
		}
	})
}

// Fields 33 and 34 are the signals ignored and caught; /proc/PID/status
// shows the same masks in hex, where the stat file shows signals 1-31 only.
func TestStatReaderSignals(t *testing.T) {
	p, err := Open("/proc")
	if err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.SIGUSR2)
	defer signal.Reset(syscall.SIGUSR2)
	st, err := p.StatReader().Stat(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	status, err := p.Status(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if !st.Ignores(syscall.SIGUSR2) || st.Ignores(syscall.SIGTERM) || st.SigIgnore != status.SigIgn&0x7fffffff || st.SigCatch != status.SigCgt&0x7fffffff {
		t.Errorf("stat ignores %#x catches %#x; status ignores %#x catches %#x; want USR2 ignored, TERM not, and the two to agree",
			st.SigIgnore, st.SigCatch, status.SigIgn, status.SigCgt)
	}
	if status.NamespaceInit() || len(status.NSpid) == 0 || status.NSpid[0] != os.Getpid() {
		t.Errorf("NSpid %v: want this process's pid, not a namespace's init", status.NSpid)
	}
}

func TestParseStatus(t *testing.T) {
	s, err := ParseStatus(7, []byte("Name:\tsleep\nTgid:\t4240\nNSpid:\t4242\t1\nSigIgn:\t0000000000004000\nSigCgt:\t0000000000000002\n"))
	if err != nil {
		t.Fatal(err)
	}
	if !s.NamespaceInit() || s.SigIgn != 1<<(syscall.SIGTERM-1) || s.SigCgt != 2 || s.Tgid != 4240 {
		t.Errorf("parsed %+v", s)
	}
}

// KeepOpen chooses whose stat files Scan keeps open; ReadOpen reads through
// one, which stays bound to its process after it is reaped.
func TestStatReaderKeepOpen(t *testing.T) {
	p, err := Open("/proc")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sleep", "30")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	pid := cmd.Process.Pid
	r := p.StatReader()
	defer r.Close()
	r.KeepOpen(func(st lineage.Stat) bool { return int(st.PID) == pid })
	if _, err := r.Scan(func(lineage.Stat) {}, nil); err != nil {
		t.Fatal(err)
	}
	if len(r.open) != 1 {
		t.Errorf("%d stat files kept open, want 1", len(r.open))
	}
	if _, open, err := r.ReadOpen(os.Getpid()); open || err != nil {
		t.Errorf("ReadOpen of a process not kept: open %v, %v", open, err)
	}
	if st, open, err := r.ReadOpen(pid); !open || err != nil || int(st.PID) != pid {
		t.Fatalf("ReadOpen of the sleeper: %+v, open %v, %v", st, open, err)
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	if _, open, err := r.ReadOpen(pid); !open || !errors.Is(err, lineage.ErrNoProcess) {
		t.Errorf("ReadOpen after the sleeper was reaped: open %v, %v; want ErrNoProcess", open, err)
	}
}

// procfsStat reads /proc/PID/stat through prometheus/procfs: the reference
// the lean parser is held to.
func (p FS) procfsStat(pid int) (lineage.Stat, error) {
	fs, err := procfs.NewFS(p.root)
	if err != nil {
		return lineage.Stat{}, err
	}
	proc, err := fs.Proc(pid)
	if err != nil {
		return lineage.Stat{}, noProcess(pid, err)
	}
	st, err := proc.Stat()
	if err != nil {
		return lineage.Stat{}, noProcess(pid, err)
	}
	return lineage.Stat{
		Identity:   lineage.Identity{PID: uint32(pid), StartTicks: st.Starttime},
		PPID:       st.PPID,
		PGRP:       st.PGRP,
		Session:    st.Session,
		State:      st.State,
		Comm:       st.Comm,
		Kernel:     st.Flags&pfKthread != 0,
		Exiting:    st.Flags&lineage.PFExiting != 0,
		Threads:    st.NumThreads,
		StartStack: st.StartStack,
	}, nil
}

const pfKthread = lineage.PFKthread

// procfsPIDs lists the processes through prometheus/procfs.
func (p FS) procfsPIDs() ([]int, error) {
	fs, err := procfs.NewFS(p.root)
	if err != nil {
		return nil, err
	}
	procs, err := fs.AllProcs()
	if err != nil {
		return nil, err
	}
	pids := make([]int, len(procs))
	for i, pr := range procs {
		pids[i] = pr.PID
	}
	return pids, nil
}
