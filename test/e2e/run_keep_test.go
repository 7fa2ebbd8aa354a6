package e2e

// A kept program is spared by the kernel at its exec, before it runs an
// instruction: lineage killed the moment it runs kills everything else and
// not it.

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// announceArg, as the first argument of this test binary (or a copy), makes
// it a program that writes "ready" to its standard output as its first act,
// then lives for a finite time (its second argument carries a marker).
const announceArg = "announce-and-sleep"

func announce() {
	os.Stdout.WriteString("ready\n")
	time.Sleep(90 * time.Second)
	os.Exit(0)
}

// keptAnnouncer copies this test binary to a program of its own, for an
// exe: rule that keeps it and nothing else.
func keptAnnouncer(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kept-announcer")
	raw, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// keptRounds is how many times in a row each variant must spare the kept
// program.
const keptRounds = 50

func TestRunKeptProgramSurvivesAnImmediateHardCancel(t *testing.T) {
	requireBackend(t, loader.BackendBPF)
	kept := keptAnnouncer(t)
	for _, v := range []loader.Variant{loader.VariantFull, loader.VariantCompat} {
		t.Run(string(v), func(t *testing.T) {
			for i := range keptRounds {
				if !keptSurvivesHardCancel(t, kept, v) {
					t.Fatalf("round %d of %d: the kept program did not survive", i+1, keptRounds)
				}
			}
		})
	}
}

// keptSurvivesHardCancel runs one round: a job starts a sleeper and the
// kept program; as soon as the program says it runs, lineage's process
// group is SIGKILLed. The sleeper and the shell must die (in the kernel
// with the full program, by the guardian with compat), the kept program
// must not. It reports whether the kept program lived. With compat, the
// kept program starts once lineage has said its guardian runs: lineage
// starts the guardian beside the job it spawned, and a lineage killed
// before it did leaves nobody to reap (the kernel, with compat, kills
// nothing at its death).
func keptSurvivesHardCancel(t *testing.T, kept string, v loader.Variant) bool {
	t.Helper()
	mark := testutil.Marker(t)
	trigger := filepath.Join(t.TempDir(), "go")
	script := fmt.Sprintf("sleep %[1]s & while [ ! -e %[4]s ]; do sleep 0.01; done; %[2]s %[3]s %[1]s & wait", testutil.Sleep(mark), kept, announceArg, trigger)
	cmd := lineageCmd("run", "-v", "--backend", "bpf", "--keep", "exe:"+kept, "--", "sh", "-c", script)
	cmd.Env = append(cmd.Env, loader.VariantEnv+"="+string(v))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Its stderr goes to a file: the kept program holds it after lineage
	// dies, and a pipe would hold Wait until it exits.
	stderr, err := os.CreateTemp(t.TempDir(), "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		for _, p := range testutil.Find(mark) {
			testutil.KillIdentity(p.PID, p.StartTicks)
		}
	}()
	if v == loader.VariantCompat {
		testutil.Eventually(t, runLimit(), "lineage to say its guardian runs", func() bool {
			return strings.Contains(readAll(stderr.Name()), "reaps the lineage if lineage is killed")
		})
	}
	if err := os.WriteFile(trigger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		hardCancel(t, cmd)
		_ = cmd.Wait()
		t.Fatalf("job said %q, %v; lineage's stderr:\n%s", line, err, readAll(stderr.Name()))
	}
	hardCancel(t, cmd)
	_ = cmd.Wait()
	var keptProc testutil.Proc
	for _, p := range testutil.Find(mark) {
		if p.Argv[0] == kept {
			keptProc = p
		}
	}
	if keptProc.PID == 0 {
		t.Errorf("the kept program is gone after the hard cancel; lineage's stderr:\n%s", readAll(stderr.Name()))
		return false
	}
	// Everything else dies: at once in the kernel, or by the guardian.
	testutil.Until(20*time.Second, func() bool { return others(mark, keptProc.PID) == 0 })
	if n := others(mark, keptProc.PID); n > 0 {
		t.Errorf("%d processes besides the kept one outlived the hard cancel: %v", n, testutil.Find(mark))
	}
	return testutil.Alive(keptProc.PID, keptProc.StartTicks)
}

// others counts the live processes carrying mark besides pid.
func others(mark string, pid int) int {
	n := 0
	for _, p := range testutil.Find(mark) {
		if p.PID != pid {
			n++
		}
	}
	return n
}

func readAll(path string) string {
	raw, _ := os.ReadFile(path)
	return string(raw)
}

// TestRunKeptPathReplacedIsKeptAndSaid: a package upgrade puts a new file
// at a kept path after the rule is made and before the job runs it. At the
// member's exec of the new file lineage resolves the rule again: the
// kernel keeps the new file from then on (a second run of it, killed
// around at once by a hard cancel, lives), and lineage says so.
func TestRunKeptPathReplacedIsKeptAndSaid(t *testing.T) {
	requireBackend(t, loader.BackendBPF)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	dir := t.TempDir()
	kept := keptAnnouncer(t)
	upgrade := filepath.Join(dir, "upgrade")
	copyTo(t, kept, upgrade)
	trigger := filepath.Join(dir, "go")
	s := testutil.Sleep(mark)
	script := fmt.Sprintf("mv -f %[1]s %[2]s; %[2]s %[3]s %[4]s.1 & sleep %[4]s & while [ ! -e %[5]s ]; do sleep 0.02; done; %[2]s %[3]s %[4]s.2 & wait",
		upgrade, kept, announceArg, s, trigger)
	cmd := lineageCmd("run", "--backend", "bpf", "--keep", "exe:"+kept, "--", "sh", "-c", script)
	cmd.Env = append(cmd.Env, loader.VariantEnv+"="+string(loader.VariantFull))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := os.CreateTemp(dir, "stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		hardCancel(t, cmd)
		_ = cmd.Wait()
		for _, p := range testutil.Find(mark) {
			testutil.KillIdentity(p.PID, p.StartTicks)
		}
	})
	lines := bufio.NewReader(out)
	if line, err := lines.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("first run of the new file said %q, %v", line, err)
	}
	said := "the file at " + kept + " changed since the rule was made"
	testutil.Eventually(t, 10*time.Second, "lineage to say the kept file changed", func() bool {
		return strings.Contains(readAll(stderr.Name()), said)
	})
	if err := os.WriteFile(trigger, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if line, err := lines.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("second run of the new file said %q, %v", line, err)
	}
	hardCancel(t, cmd)
	_ = cmd.Wait()
	for _, n := range []string{".1", ".2"} {
		alive := false
		for _, p := range testutil.Find(s + n) {
			alive = alive || (p.Argv[0] == kept && testutil.Alive(p.PID, p.StartTicks))
		}
		if !alive {
			t.Errorf("run %s of the replaced kept program died in the hard cancel; stderr:\n%s", n, readAll(stderr.Name()))
		}
	}
	testutil.Until(10*time.Second, func() bool { return len(testutil.Sleepers(mark)) == 0 })
	if left := testutil.Sleepers(mark); len(left) > 0 {
		t.Errorf("the sleeper outlived the hard cancel: %v", left)
	}
}

// TestRunKeptPathReplacedIsReported: the report and the record of a job
// that ran a kept path's new file say the file changed, and that the
// process was kept.
func TestRunKeptPathReplacedIsReported(t *testing.T) {
	requireBackend(t, loader.BackendBPF)
	mark := testutil.Marker(t)
	dir := t.TempDir()
	kept := keptAnnouncer(t)
	upgrade := filepath.Join(dir, "upgrade")
	copyTo(t, kept, upgrade)
	t.Cleanup(func() {
		for _, p := range testutil.Find(mark) {
			testutil.KillIdentity(p.PID, p.StartTicks)
		}
	})
	path := filepath.Join(dir, "trace.jsonl")
	script := fmt.Sprintf("mv -f %s %s; %s %s %s >/dev/null 2>&1 & sleep 1", upgrade, kept, kept, announceArg, testutil.Sleep(mark))
	res := runJobNoLeakCheck(t, "--backend", "bpf", "--keep", "exe:"+kept, "--record", path, "--", "sh", "-c", script)
	if res.report == nil {
		t.Fatalf("no report; stderr:\n%s", res.stderr)
	}
	said := "the file at " + kept + " changed since the rule was made"
	warned := false
	for _, w := range res.report.Warnings {
		warned = warned || strings.Contains(w, said)
	}
	if !warned {
		t.Errorf("the report's warnings %q do not say the kept file changed", res.report.Warnings)
	}
	kepts := 0
	for _, o := range res.report.Reap.Outcomes {
		if o.Result == lineage.Kept {
			kepts++
		}
	}
	if kepts != 1 {
		t.Errorf("%d processes kept, want the replaced program's run; outcomes %+v", kepts, res.report.Reap.Outcomes)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"kind":"keep"`) || !strings.Contains(string(raw), said) {
		t.Errorf("the record has no keep event saying the file changed:\n%s", raw)
	}
}

func copyTo(t *testing.T, src, dst string) {
	t.Helper()
	raw, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, raw, 0o755); err != nil {
		t.Fatal(err)
	}
}
