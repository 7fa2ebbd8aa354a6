package store

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// One daemon per state directory: a second lock is refused, naming the
// holder's pid, until the first is released.
func TestLockDirIsExclusive(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	first, err := LockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(dir)
	if err != nil || info.Mode().Perm() != 0o700 {
		t.Fatalf("state dir made with mode %v (%v), want 0700", info.Mode().Perm(), err)
	}
	second, err := LockDir(dir)
	if err == nil {
		second.Release()
		t.Fatal("a second lock of a locked state dir was taken")
	}
	if want := "in use by another lineage serve (pid " + strconv.Itoa(os.Getpid()) + ")"; !strings.Contains(err.Error(), want) {
		t.Errorf("second lock: %v, want it to say %q", err, want)
	}
	first.Release()
	again, err := LockDir(dir)
	if err != nil {
		t.Fatalf("lock after release: %v", err)
	}
	again.Release()
	var none *DirLock
	none.Release() // a server with no state releases nothing
}

// A state directory others may write is refused, and nothing is locked.
func TestLockDirRefusesAGroupWritableDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	l, err := LockDir(dir)
	if err == nil {
		l.Release()
		t.Fatal("a group-writable state dir was locked")
	}
	if !strings.Contains(err.Error(), "lets group or others write it") {
		t.Errorf("lock: %v, want the mode refused", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, lockName)); !os.IsNotExist(err) {
		t.Errorf("a lock file was made in a refused dir: %v", err)
	}
}
