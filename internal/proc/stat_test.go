package proc_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/procfs"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
)

// Self names this process as prometheus/procfs reads it.
func TestSelfAgreesWithProcfs(t *testing.T) {
	self, err := proc.Self()
	if err != nil {
		t.Fatal(err)
	}
	fs, err := procfs.NewFS("/proc")
	if err != nil {
		t.Fatal(err)
	}
	p, err := fs.Self()
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stat()
	if err != nil {
		t.Fatal(err)
	}
	want := lineage.Identity{PID: uint32(st.PID), StartTicks: st.Starttime}
	if self != want || self.StartTicks == 0 {
		t.Fatalf("proc.Self() = %v, procfs reads %v", self, want)
	}
}

// A process that is gone reads ErrNoProcess.
func TestReadGoneProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Skipf("no true: %v", err)
	}
	if _, err := proc.ReadStat("/proc", cmd.Process.Pid); !errors.Is(err, lineage.ErrNoProcess) {
		t.Fatalf("Read(reaped pid %d) = %v, want ErrNoProcess", cmd.Process.Pid, err)
	}
}

func TestParseStatFields(t *testing.T) {
	st, err := lineage.ParseStat(12, []byte("12 (a) b) S 1 12 -1 0 -1 2097152 0 0 0 0 0 0 0 0 20 0 3 0 500\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	want := lineage.Stat{Identity: lineage.Identity{PID: 12, StartTicks: 500}, Comm: "a) b", State: "S", PPID: 1, PGRP: 12, Session: -1, Kernel: true, Threads: 3}
	if st != want {
		t.Fatalf("Parse = %+v\nwant    %+v", st, want)
	}
	// PF_FORKNOEXEC|PF_EXITING: a process in exit(2), not yet a zombie.
	st, err = lineage.ParseStat(13, []byte("13 (sh) R 1 13 13 0 -1 4194308 0 0 0 0 0 0 0 0 20 0 1 0 501\n"), "")
	if err != nil || !st.Exiting || st.Kernel {
		t.Fatalf("an exiting process: %+v, %v; want Exiting, not Kernel", st, err)
	}
	if _, err := lineage.ParseStat(12, []byte("12 (sh) S 1"), ""); !errors.Is(err, lineage.ErrMalformedStat) {
		t.Fatalf("a short record: %v, want ErrMalformed", err)
	}
}

// A stat record longer than the first read's buffer is read whole.
func TestReadLongRecord(t *testing.T) {
	root := t.TempDir()
	comm := strings.Repeat("x", 3000)
	if err := os.MkdirAll(filepath.Join(root, "77"), 0o755); err != nil {
		t.Fatal(err)
	}
	rec := "77 (" + comm + ") S 1 77 77 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 500\n"
	if err := os.WriteFile(filepath.Join(root, "77", "stat"), []byte(rec), 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := proc.ReadStat(root, 77)
	if err != nil || st.Comm != comm || st.StartTicks != 500 || st.PPID != 1 {
		t.Fatalf("Read = %d-byte comm, start %d, ppid %d, %v; want the whole record", len(st.Comm), st.StartTicks, st.PPID, err)
	}
	if _, err := proc.ReadStat(root, 78); !errors.Is(err, lineage.ErrNoProcess) {
		t.Errorf("Read(missing) = %v, want ErrNoProcess", err)
	}
}

// Exe and UIDs read this process as the kernel shows it to itself.
func TestExeAndUIDsOfSelf(t *testing.T) {
	p, err := proc.Open("/proc")
	if err != nil {
		t.Fatal(err)
	}
	exe, err := p.Exe(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if exe != want {
		t.Errorf("Exe(self) = %q, want %q", exe, want)
	}
	ids, err := p.UIDs(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if ids.Real != uint32(os.Getuid()) || ids.Effective != uint32(os.Geteuid()) {
		t.Errorf("UIDs(self) = %+v, want real %d effective %d", ids, os.Getuid(), os.Geteuid())
	}
	if _, err := p.UIDs(0x7fffffff); !errors.Is(err, lineage.ErrNoProcess) {
		t.Errorf("UIDs(no such pid) = %v, want ErrNoProcess", err)
	}
	if _, err := p.Exe(0x7fffffff); !errors.Is(err, lineage.ErrNoProcess) {
		t.Errorf("Exe(no such pid) = %v, want ErrNoProcess", err)
	}
}

// A process read while it execs is named by its old program or its new
// one, never by nothing: the kernel shows an empty command line from the
// moment it gives the process its new address space until the new
// arguments are laid out, and ReadArgv waits that out.
func TestReadArgvThroughAnExec(t *testing.T) {
	setsid, err := exec.LookPath("setsid")
	if err != nil {
		t.Fatalf("setsid: %v", err)
	}
	for range 30 {
		cmd := exec.Command(setsid, "sleep", "5")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var reads []string
		// Until sleep's own argv, which a loaded machine may delay: the
		// deadline only ends a failing test.
		for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); {
			argv, err := proc.ReadArgv("/proc", cmd.Process.Pid)
			if err != nil {
				t.Errorf("ReadArgv(%d): %v", cmd.Process.Pid, err)
				break
			}
			reads = append(reads, strings.Join(argv, " "))
			if len(argv) == 2 {
				break
			}
		}
		cmd.Process.Kill()
		cmd.Wait()
		for _, r := range reads {
			if r != setsid+" sleep 5" && r != "sleep 5" {
				t.Fatalf("read %q while setsid became sleep (%d reads)", r, len(reads))
			}
		}
		if reads[len(reads)-1] != "sleep 5" {
			t.Fatalf("never read sleep's own command line in %d reads over 2s: the last was %q", len(reads), reads[len(reads)-1])
		}
	}
}

// A zombie has no command line, and reads as none at once.
func TestReadArgvOfAZombie(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	for {
		st, err := proc.ReadStat("/proc", cmd.Process.Pid)
		if err != nil {
			t.Fatal(err)
		}
		if st.Zombie() {
			break
		}
		time.Sleep(time.Millisecond)
	}
	if argv, err := proc.ReadArgv("/proc", cmd.Process.Pid); err != nil || len(argv) != 0 {
		t.Fatalf("ReadArgv(zombie) = %q, %v; want none", argv, err)
	}
}
