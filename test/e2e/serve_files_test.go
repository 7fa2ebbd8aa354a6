package e2e

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// serveOnce runs `lineage serve` with args, which must fail before it
// serves, and returns its stderr and exit status.
func serveOnce(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := lineageCmd(append([]string{"serve"}, args...)...)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return errb.String(), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return errb.String(), 0
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("lineage serve %v still ran after 60s:\n%s", args, errb.String())
		return "", 0
	}
}

// chownNobody gives path to uid 65534.
func chownNobody(t *testing.T, path string) {
	t.Helper()
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
}

// The daemon uses only a state and record directory that is its own, and
// reads only state files it wrote: a world-writable --state-dir or
// --record-dir, one owned by uid 65534, a state.json uid 65534 wrote, a
// state file that is a symbolic link, a snapshot that doesn't parse, and
// anything but a dead daemon's socket at --socket: each is refused before
// the daemon serves, naming the path and why, and nothing is changed.
func TestServeRefusesFilesItDoesNotOwn(t *testing.T) {
	base := t.TempDir()
	dir := func(name string, mode os.FileMode) string {
		p := filepath.Join(base, name)
		if err := os.Mkdir(p, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	open := dir("open", 0o777)
	nobodys := dir("nobodys", 0o700)
	chownNobody(t, nobodys)
	foreign := dir("foreign", 0o700)
	snapshot := `{"version":1,"next_id":1,"sessions":[{"id":"s1","kind":"autonomous","uid":65534,"opened":"2026-01-01T00:00:00Z","roots":[{"root":{"pid":1,"start":1},"session":"s1","added":"2026-01-01T00:00:00Z"}],"keeps":[]}]}`
	if err := os.WriteFile(filepath.Join(foreign, "state.json"), []byte(snapshot), 0o600); err != nil {
		t.Fatal(err)
	}
	chownNobody(t, filepath.Join(foreign, "state.json"))
	linked := dir("linked", 0o700)
	if err := os.Symlink(filepath.Join(foreign, "state.json"), filepath.Join(linked, "state.json")); err != nil {
		t.Fatal(err)
	}
	torn := dir("torn", 0o700)
	if err := os.WriteFile(filepath.Join(torn, "state.json"), []byte(`{"version":1,"sess`), 0o600); err != nil {
		t.Fatal(err)
	}
	good := dir("good", 0o700)
	notSocket := filepath.Join(base, "file.sock")
	if err := os.WriteFile(notSocket, []byte("a file"), 0o600); err != nil {
		t.Fatal(err)
	}
	emptyDir := dir("empty.sock", 0o755)

	sock := func() string { return filepath.Join(t.TempDir(), "lineage.sock") }
	for _, c := range []struct {
		name string
		args []string
		want []string // in the message
	}{
		{"world-writable state dir", []string{"--state-dir", open}, []string{open, "mode 0777", "group or others"}},
		{"uid 65534's state dir", []string{"--state-dir", nobodys}, []string{nobodys, "owned by uid 65534"}},
		{"uid 65534's state.json", []string{"--state-dir", foreign}, []string{filepath.Join(foreign, "state.json"), "owned by uid 65534"}},
		{"a linked state.json", []string{"--state-dir", linked}, []string{filepath.Join(linked, "state.json"), "symbolic link"}},
		{"a torn snapshot", []string{"--state-dir", torn}, []string{filepath.Join(torn, "state.json"), "unexpected end of JSON input"}},
		{"world-writable record dir", []string{"--state-dir", good, "--record-dir", open}, []string{"record dir " + open, "mode 0777"}},
		{"a file at --socket", []string{"--state-dir", good, "--socket", notSocket}, []string{notSocket, "a regular file, not a socket"}},
		{"a directory at --socket", []string{"--state-dir", good, "--socket", emptyDir}, []string{emptyDir, "a directory, not a socket"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := tree(t, base)
			args := append([]string{"--backend", "proc", "--pin-dir", "none", "--socket", sock()}, c.args...)
			msg, code := serveOnce(t, args...)
			if code == 0 {
				t.Fatalf("served: %s", msg)
			}
			for _, w := range c.want {
				if !strings.Contains(msg, w) {
					t.Errorf("refusal %q does not say %q", msg, w)
				}
			}
			if strings.Contains(msg, "serving on") {
				t.Errorf("it served before it refused: %s", msg)
			}
			if after := tree(t, base); after != before {
				t.Errorf("the refusal changed files:\nbefore %s\nafter  %s", before, after)
			}
		})
	}
}

// tree is every file under dir with its mode, owner and contents, except
// the lock a refused daemon may have made in its own state directory.
func tree(t *testing.T, dir string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.Walk(dir, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if filepath.Base(p) == "lock" {
			return nil
		}
		fmt.Fprintf(&b, "%s %v", p, info.Mode())
		if info.Mode().IsRegular() {
			data, _ := os.ReadFile(p)
			fmt.Fprintf(&b, " %q", data)
		}
		b.WriteString("\n")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// One daemon per state directory: a second one on the same --state-dir
// (another socket, no pins) exits non-zero naming the first's pid, and
// the first's state is byte for byte what it was.
func TestServeOneDaemonPerStateDir(t *testing.T) {
	d := startDaemon(t, "")
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "first", Kind: "autonomous"}, nil)
	before := stateFiles(t, d)
	msg, code := serveOnce(t, "--backend", "proc", "--pin-dir", "none", "--state-dir", d.state, "--socket", filepath.Join(t.TempDir(), "second.sock"))
	if code == 0 || !strings.Contains(msg, fmt.Sprintf("pid %d", d.cmd.Process.Pid)) || !strings.Contains(msg, d.state) {
		t.Errorf("a second daemon: exit %d %q, want refused naming the first's pid %d", code, msg, d.cmd.Process.Pid)
	}
	after := stateFiles(t, d)
	for name, data := range before {
		if after[name] != data {
			t.Errorf("%s changed:\nbefore %q\nafter  %q", name, data, after[name])
		}
	}
	if d.apiStatus("GET", "/v1/sessions/first", nil) != 0 {
		t.Error("the first daemon lost its session")
	}
}

// Records are pruned per uid: uid 65534's closes rotate its own records
// (--record-keep 2 each) and never remove root's.
func TestServeRecordsArePrunedPerUID(t *testing.T) {
	records := t.TempDir()
	d := startDaemon(t, "", "--record-dir", records, "--record-keep", "2")
	n := asNobody(t, d)
	d.execArgv("roots-rec", "autonomous", "true")
	d.do("POST", "/v1/sessions/roots-rec/close", nil, nil)
	for i := range 5 {
		id := fmt.Sprintf("nobody-rec%d", i)
		if msg, code := n.lineage("exec", "--session", id, "--kind", "autonomous", "--", "true"); code != 0 {
			t.Fatalf("uid 65534's exec: %s", msg)
		}
		if msg, code := n.lineage("session", "close", id); code != 0 {
			t.Fatalf("uid 65534's close: %s", msg)
		}
	}
	// Each record closes, and its uid's are pruned, 10 s after its
	// session closed.
	var names []string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		names = recordFiles(t, records)
		nobodys := 0
		for _, name := range names {
			if strings.Contains(name, "-u65534-") {
				nobodys++
			}
		}
		if nobodys == 2 && !strings.Contains(d.stderr.String(), "record of session") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("records %v: want uid 65534's pruned to 2", names)
		}
	}
	var roots []string
	for _, name := range names {
		if strings.Contains(name, "-u0-roots-rec.jsonl") {
			roots = append(roots, name)
		}
	}
	if len(roots) != 1 {
		t.Errorf("records %v: want root's record kept", names)
	}
	for _, want := range []string{"-u65534-nobody-rec3.jsonl", "-u65534-nobody-rec4.jsonl"} {
		if !slicesContainSuffix(names, want) {
			t.Errorf("records %v: want uid 65534's newest two, %s among them", names, want)
		}
	}
}

func slicesContainSuffix(names []string, suffix string) bool {
	for _, n := range names {
		if strings.HasSuffix(n, suffix) {
			return true
		}
	}
	return false
}

// Say which tracker runs: serve's first line names its backend and why;
// lineage status says it in plain text; --backend bpf never falls back,
// and the proc backend, auto's fallback (uid 65534 can't load BPF) or
// asked for, is a warning.
func TestServeSaysWhichTrackerRuns(t *testing.T) {
	d := startDaemon(t, "")
	first, _, _ := strings.Cut(d.stderr.String(), "\n")
	if !strings.HasPrefix(first, "lineage: backend bpf (") {
		t.Errorf("serve's first line %q, want the backend and why", first)
	}
	out, code := d.run("status")
	if code != 0 || !strings.Contains(out, "backend bpf (") {
		t.Errorf("lineage status: %q, want the backend named", out)
	}

	n := asNobody(t, d)
	own, err := os.MkdirTemp("", "lineage-nobody-serve")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(own) })
	if err := os.Chmod(own, 0o755); err != nil {
		t.Fatal(err)
	}
	chownNobody(t, own)
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	run := func(backend string) (string, int) {
		t.Helper()
		state := filepath.Join(own, backend)
		cmd := n.cmd(n.bin, "serve", "--backend", backend, "--pin-dir", "none", "--state-dir", state, "--socket", filepath.Join(own, backend+".sock"))
		var errb lockedBuffer
		cmd.Stderr = &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			select {
			case err := <-done:
				var ee *exec.ExitError
				if errors.As(err, &ee) {
					return errb.String(), ee.ExitCode()
				}
				return errb.String(), 0
			default:
			}
			if strings.Contains(errb.String(), servingNote) {
				_ = cmd.Process.Signal(os.Interrupt)
				<-done
				return errb.String(), 0
			}
			if time.Now().After(deadline) {
				_ = cmd.Process.Kill()
				<-done
				t.Fatalf("serve --backend %s as uid 65534 neither served nor failed: %s", backend, errb.String())
			}
		}
	}
	msg, code := run("bpf")
	if code == 0 || !strings.Contains(msg, "bpf") {
		t.Errorf("--backend bpf as uid 65534: exit %d %q, want it refused, never a fallback", code, msg)
	}
	msg, code = run("auto")
	first, _, _ = strings.Cut(msg, "\n")
	if code != 0 || !strings.HasPrefix(first, "lineage: warning: backend proc (bpf: ") {
		t.Errorf("--backend auto as uid 65534: exit %d, first line %q, want a warning naming proc and why", code, first)
	}
	// Asked for, the proc backend misses what it misses all the same.
	msg, code = run("proc")
	first, _, _ = strings.Cut(msg, "\n")
	if code != 0 || first != "lineage: warning: backend proc (asked for proc): processes that live and die between two scans of /proc are not seen" {
		t.Errorf("--backend proc as uid 65534: exit %d, first line %q, want the proc backend's warning", code, first)
	}
}
