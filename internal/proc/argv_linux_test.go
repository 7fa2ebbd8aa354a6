package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A live process whose command line reads empty is waited for only while
// its stat shows no arguments laid out, as in the middle of an exec: one
// whose arguments' bounds enclose nothing (set so by prctl, which needs
// CAP_SYS_RESOURCE, so a fake /proc stands in for it) is named by nothing at
// once.
func TestReadArgvWaitsOnlyMidExec(t *testing.T) {
	root := t.TempDir()
	for pid, argEnd := range map[int]uint64{77: 140720000000100, 78: 0} {
		f := strings.Fields(fakeStat(pid, "fake", "S", 1, pid, pid, 0x400100, 500, 0x7ffc1234, 0))
		f[48] = strconv.FormatUint(argEnd, 10) // field 49, arg_end
		writeFakeProc(t, root, pid, strings.Join(f, " ")+"\n")
		if err := os.WriteFile(filepath.Join(root, strconv.Itoa(pid), "cmdline"), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := ReadStat(root, 77); err != nil || st.ArgEnd != 140720000000100 {
		t.Fatalf("ReadStat = %+v, %v; want arg_end 140720000000100", st, err)
	}
	for _, c := range []struct {
		pid  int
		wait bool
	}{{77, false}, {78, true}} {
		start := time.Now()
		argv, err := ReadArgv(root, c.pid)
		took := time.Since(start)
		if err != nil || len(argv) != 0 {
			t.Fatalf("ReadArgv(%d) = %q, %v; want none", c.pid, argv, err)
		}
		if waited := took >= midExecWait; waited != c.wait {
			t.Errorf("ReadArgv(%d) took %v; want a wait for the exec's end: %v", c.pid, took, c.wait)
		}
	}
}
