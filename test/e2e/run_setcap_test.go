package e2e

// Capabilities are not a licence: a setcap install of lineage, run by uid
// 65534, kills (in user space and in the kernel) only what uid 65534 could
// kill with kill(2). A member that became root, as a sudo-started
// descendant does, is reported, not killed: when the job ends, and when
// lineage is hard-cancelled and only the kernel is left to reap.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// becomeRootC is a set-uid root program that takes root's uids whole (real,
// effective and saved, as sudo does) and runs its arguments.
const becomeRootC = `#define _GNU_SOURCE
#include <stdio.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (setresgid(0, 0, 0) != 0 || setresuid(0, 0, 0) != 0) {
		perror("become-root");
		return 1;
	}
	execvp(argv[1], argv + 1);
	perror("become-root: exec");
	return 127;
}
`

// setcapInstall is a setcap copy of lineage (this test binary) and a
// set-uid root helper, in a directory uid 65534 can reach.
type setcapInstall struct {
	dir, lineage, becomeRoot string
}

// newSetcapInstall builds the install, or skips where the tools are
// missing (fails under LINEAGE_REQUIRE_TOOLS=1); it fails where set-uid
// can't work (the temporary directory is mounted nosuid).
func newSetcapInstall(t *testing.T) *setcapInstall {
	t.Helper()
	// CAP_KILL too: the bound must hold even where the kernel would let
	// lineage signal anyone.
	return newSetcapInstallWith(t, "cap_bpf,cap_perfmon,cap_kill+ep")
}

// newSetcapInstallWith is newSetcapInstall with the tracker's
// capabilities as setcap(8) reads them.
func newSetcapInstallWith(t *testing.T, caps string) *setcapInstall {
	t.Helper()
	setcap := testutil.LookTool(t, "setcap")
	cc := testutil.LookTool(t, "cc")
	testutil.LookTool(t, "setpriv")
	dir, err := os.MkdirTemp("", "lineage-setcap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var fs unix.Statfs_t
	if err := unix.Statfs(dir, &fs); err != nil {
		t.Fatal(err)
	}
	if fs.Flags&unix.ST_NOSUID != 0 {
		t.Fatalf("%s is mounted nosuid: set-uid and file capabilities can't work there (set TMPDIR elsewhere)", dir)
	}
	in := &setcapInstall{dir: dir, lineage: filepath.Join(dir, "lineage"), becomeRoot: filepath.Join(dir, "become-root")}
	copyFile(t, frontBin, in.lineage)
	tracker := filepath.Join(dir, "lineage-tracker")
	copyFile(t, trackerBin, tracker)
	// The capabilities are the tracker's, which the front execve's for a
	// standalone run.
	if out, err := exec.Command(setcap, caps, tracker).CombinedOutput(); err != nil {
		t.Fatalf("setcap: %v\n%s", err, out)
	}
	src := filepath.Join(dir, "become-root.c")
	if err := os.WriteFile(src, []byte(becomeRootC), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-o", in.becomeRoot, src).CombinedOutput(); err != nil {
		t.Fatalf("cc: %v\n%s", err, out)
	}
	if err := os.Chmod(in.becomeRoot, os.ModeSetuid|0o755); err != nil {
		t.Fatal(err)
	}
	return in
}

// asNobody turns cmd, a lineageCmd, into the setcap install run by uid
// 65534.
func (in *setcapInstall) asNobody(cmd *exec.Cmd) {
	setpriv, _ := exec.LookPath("setpriv")
	cmd.Args = append([]string{setpriv, "--reuid", "65534", "--regid", "65534", "--clear-groups", "--", in.lineage}, cmd.Args[1:]...)
	cmd.Path = setpriv
	cmd.Dir = in.dir
}

// stderrFile is a file for lineage's stderr: a leftover lineage may not
// kill holds it open, and a pipe would keep Wait waiting for it.
func stderrFile(t *testing.T) (*os.File, func() string) {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, func() string {
		raw, _ := os.ReadFile(f.Name())
		return string(raw)
	}
}

// uidsOf returns the real and saved uid of pid, from /proc/PID/status.
func uidsOf(t *testing.T, pid int) (real, saved string) {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[0] == "Uid:" {
			return f[1], f[3]
		}
	}
	t.Fatalf("no Uid line in /proc/%d/status", pid)
	return "", ""
}

// splitByUID returns the sleepers carrying mark: root's, and uid 65534's.
func splitByUID(t *testing.T, mark string) (root, nobody []testutil.Proc) {
	t.Helper()
	for _, p := range testutil.Sleepers(mark) {
		if real, saved := uidsOf(t, p.PID); real == "0" && saved == "0" {
			root = append(root, p)
		} else {
			nobody = append(nobody, p)
		}
	}
	return root, nobody
}

func TestRunSetcapHardCancelSparesWhatTheUserCantKill(t *testing.T) {
	requireBackend(t, loader.BackendBPF)
	in := newSetcapInstall(t)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	t.Cleanup(func() {
		for _, p := range testutil.Find(mark) {
			testutil.KillIdentity(p.PID, p.StartTicks)
		}
	})
	s := testutil.Sleep(mark)
	errFile, stderr := stderrFile(t)
	cmd := startUntilReadyWith(t, func(cmd *exec.Cmd) {
		in.asNobody(cmd)
		cmd.Stderr = errFile
	}, "run", "--backend", loader.BackendBPF, "--", "sh", "-c",
		fmt.Sprintf("%[1]s sleep %[2]s & setsid sleep %[2]s & sleep 0.3; echo ready; sleep %[2]s", in.becomeRoot, s))
	var root, nobody []testutil.Proc
	for deadline := time.Now().Add(5 * time.Second); len(root) != 1 || len(nobody) != 2; {
		if time.Now().After(deadline) {
			t.Fatalf("root's sleepers %v, uid 65534's %v: want 1 and 2; stderr:\n%s", root, nobody, stderr())
		}
		time.Sleep(20 * time.Millisecond)
		root, nobody = splitByUID(t, mark)
	}
	hardCancel(t, cmd)
	_ = cmd.Wait()
	for _, p := range nobody {
		if !testutil.WaitGone(p.PID, p.StartTicks, 30*time.Second) {
			t.Errorf("uid 65534's member %d %q outlived the hard cancel", p.PID, p.Argv)
		}
	}
	if !testutil.Alive(root[0].PID, root[0].StartTicks) {
		t.Errorf("the member that became root was killed by the kernel, though uid 65534 could not signal it; stderr:\n%s", stderr())
	}
}

func TestRunSetcapReapReportsWhatTheUserCantKill(t *testing.T) {
	requireBackend(t, loader.BackendBPF)
	in := newSetcapInstall(t)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	t.Cleanup(func() {
		for _, p := range testutil.Find(mark) {
			testutil.KillIdentity(p.PID, p.StartTicks)
		}
	})
	s := testutil.Sleep(mark)
	// The root-owned member keeps forking through the reap: containment
	// runs while it does.
	forker := fmt.Sprintf(`%s sh -c 'sleep %s & i=0; while [ $i -lt 500 ]; do sleep 0.02; i=$((i+1)); done' &`, in.becomeRoot, s)
	cmd := lineageCmd("run", "--backend", loader.BackendBPF, "--linger", "0", "--grace", "1s", "--", "sh", "-c",
		fmt.Sprintf("%s setsid sleep %s & sleep 0.4", forker, s))
	in.asNobody(cmd)
	errFile, stderr := stderrFile(t)
	cmd.Stderr = errFile
	if err := cmd.Run(); err != nil {
		t.Fatalf("lineage: %v; stderr:\n%s", err, stderr())
	}
	root, nobody := splitByUID(t, mark)
	if len(nobody) != 0 {
		t.Errorf("uid 65534's leftovers lived on: %v; stderr:\n%s", nobody, stderr())
	}
	if len(root) != 1 {
		t.Errorf("root's sleepers %v, want the one uid 65534 could not signal alive; stderr:\n%s", root, stderr())
	}
	if !strings.Contains(stderr(), "uid 65534, who ran lineage, could not signal it") {
		t.Errorf("the root-owned members are not reported as refused; stderr:\n%s", stderr())
	}
}

// Capabilities to change uids on a setcap install are still not a licence:
// `--user` runs a command only as the user who ran lineage, never as
// another (root, here), and the command refused does not run.
func TestRunSetcapUserRunsOnlyAsTheCaller(t *testing.T) {
	in := newSetcapInstallWith(t, "cap_bpf,cap_perfmon,cap_kill,cap_setuid,cap_setgid+ep")
	out := filepath.Join(in.dir, "out")
	if err := os.Mkdir(out, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		user    string
		code    int
		wantUID string // "" when the command must not run
	}{
		{"root", 125, ""},
		{"0:65534", 125, ""},
		{"65534", 0, "65534"},
	} {
		file := filepath.Join(out, "uid-"+strings.ReplaceAll(c.user, ":", "-"))
		cmd := lineageCmd("run", "--user", c.user, "--", "sh", "-c", "id -u >"+file)
		in.asNobody(cmd)
		output, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != c.code {
			t.Errorf("--user %s: exit %d, want %d; output:\n%s", c.user, code, c.code, output)
		}
		raw, err := os.ReadFile(file)
		switch {
		case c.wantUID == "" && err == nil:
			t.Errorf("--user %s: the command ran, as uid %s; output:\n%s", c.user, strings.TrimSpace(string(raw)), output)
		case c.wantUID == "" && !strings.Contains(string(output), "setcap install"):
			t.Errorf("--user %s: the refusal does not name the setcap install:\n%s", c.user, output)
		case c.wantUID != "" && strings.TrimSpace(string(raw)) != c.wantUID:
			t.Errorf("--user %s: the command ran as uid %q (%v), want %s; output:\n%s", c.user, strings.TrimSpace(string(raw)), err, c.wantUID, output)
		}
	}
}
