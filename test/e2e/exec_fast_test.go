package e2e

// lineage exec's fast path (internal/fastexec): in a cgo build, C registers
// the plain command line and execs the command before the Go runtime
// starts; everything else is Go's `lineage exec`, with Go's outcome. The
// front under test is built with cgo (as make build and a plain go build
// build it), so it has the fast path; the same front built with
// CGO_ENABLED=0 has none, and is the reference.

import (
	"context"
	"debug/buildinfo"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

// goPathFront builds the front without cgo: no fast path.
func goPathFront(t *testing.T) string {
	t.Helper()
	gotool := testutil.LookTool(t, "go")
	out := filepath.Join(t.TempDir(), "lineage")
	cmd := exec.Command(gotool, "build", "-o", out, "./cmd/lineage")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/lineage, CGO_ENABLED=0: %v\n%s", err, msg)
	}
	return out
}

// builtWithCgo reports whether the binary at path was built with cgo: the
// front has the fast path exactly then.
func builtWithCgo(t *testing.T, path string) bool {
	t.Helper()
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("build info of %s: %v", path, err)
	}
	for _, s := range info.Settings {
		if s.Key == "CGO_ENABLED" {
			return s.Value == "1"
		}
	}
	return false
}

// goStarted says whether a run printed the Go runtime's init trace
// (GODEBUG=inittrace=1): Go's path ran, not the fast path alone.
func goStarted(stderr string) bool { return strings.Contains(stderr, "init runtime @") }

// withoutInitTrace drops the init trace's lines from stderr.
func withoutInitTrace(stderr string) string {
	var keep []string
	for _, l := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(l, "init ") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "")
}

func TestExecFastPath(t *testing.T) {
	if !builtWithCgo(t, frontBin) {
		if os.Getenv("LINEAGE_REQUIRE_TOOLS") == "1" {
			t.Fatalf("the front %s has no fast path: built without cgo", frontBin)
		}
		t.Skip("the front was built without cgo: no fast path to test")
	}
	d := startDaemon(t, "")
	fast := func(env []string, args ...string) binResult {
		t.Helper()
		env = append([]string{"GODEBUG=inittrace=1", client.EnvSocket + "=" + d.sock}, env...)
		return runBin(t, frontBin, env, args...)
	}
	slow := goPathFront(t)
	ref := func(env []string, args ...string) binResult {
		t.Helper()
		env = append([]string{"GODEBUG=inittrace=1", client.EnvSocket + "=" + d.sock}, env...)
		return runBin(t, slow, env, args...)
	}
	t.Run("registers", func(t *testing.T) { testExecFastRegisters(t, d, fast, ref) })
	t.Run("argv", func(t *testing.T) { testExecFastArgv(t, d, fast, ref) })
	t.Run("falls back", func(t *testing.T) { testExecFastFallsBack(t, d, fast, ref) })
	t.Run("member elsewhere", func(t *testing.T) { testExecFastMemberElsewhere(t, d, fast, ref, slow) })
}

type execRunner func(env []string, args ...string) binResult

// rootsOf returns the roots of session, by identity: none when there is
// no such session.
func (d *daemon) rootsOf(t *testing.T, session string) map[lineage.Identity]api.Root {
	t.Helper()
	var roots []api.Root
	err := d.client().Do(context.Background(), "GET", client.Query("/v1/roots", "session", session), nil, &roots)
	var apiErr *client.APIError
	if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		return nil
	}
	if err != nil {
		t.Fatalf("roots of session %s: %v", session, err)
	}
	out := make(map[lineage.Identity]api.Root)
	for _, r := range roots {
		out[r.Root] = r
	}
	return out
}

// selfStat is a shell command that prints its own pid and start time, as
// the root's identity.
const selfStat = `read -r l </proc/$$/stat; set -- ${l##*) }; shift 19; echo $$@$1`

// The fast path registers the process, with the flags in both forms, then
// the command runs with the same pid and start time; Go never started.
func testExecFastRegisters(t *testing.T, d *daemon, fast, ref execRunner) {
	for _, c := range []struct {
		env            []string
		flags          []string
		session, label string
	}{
		{nil, []string{"--session", "fast-a", "--kind", "autonomous", "--label", "first"}, "fast-a", "first"},
		{nil, []string{"--session=fast-a", "--label=second", "--kind=autonomous", "--label", "third"}, "fast-a", "third"},
		{[]string{client.EnvSocket + "=/nonexistent/lineage.sock"}, []string{"--socket", d.sock, "--session", "fast-b"}, "fast-b", ""},
		{[]string{client.EnvSocket + "=/nonexistent/lineage.sock"}, []string{"--session", "fast-b", "--socket=" + d.sock}, "fast-b", ""},
	} {
		res := fast(c.env, append(append([]string{"exec"}, c.flags...), "--", "sh", "-c", selfStat)...)
		if res.code != 0 || goStarted(res.stderr) {
			t.Errorf("exec %q: exit %d, Go started: %v; stderr %q", c.flags, res.code, goStarted(res.stderr), withoutInitTrace(res.stderr))
			continue
		}
		id, err := lineage.ParseIdentity(strings.TrimSpace(res.stdout))
		if err != nil {
			t.Fatalf("exec %q: the command printed %q: %v", c.flags, res.stdout, err)
		}
		r, ok := d.rootsOf(t, c.session)[id]
		if !ok {
			t.Errorf("exec %q: the command ran as %s, not a root of %s", c.flags, id, c.session)
			continue
		}
		if r.Label != c.label || !slices.Equal(r.Command, []string{"sh", "-c", selfStat}) {
			t.Errorf("exec %q: root label %q command %q, want %q and the command", c.flags, r.Label, r.Command, c.label)
		}
	}
	// The reference does start Go, so the check above can fail.
	if res := ref(nil, "exec", "--session", "fast-a", "--", "true"); res.code != 0 || !goStarted(res.stderr) {
		t.Errorf("Go's path: exit %d, Go started %v: %q", res.code, goStarted(res.stderr), withoutInitTrace(res.stderr))
	}
}

// Every argument reaches the daemon as it was: quotes, backslashes,
// control characters, UTF-8 and empty ones; an argument that isn't UTF-8
// is Go's to send, and is recorded as Go's path records it.
func testExecFastArgv(t *testing.T, d *daemon, fast, ref execRunner) {
	odd := []string{`a"b`, `c\d`, "e\nf", "\t\x01\x1f\x7f", "é 日本 \U0001F600", "", "-", "--json"}
	argv := append([]string{"sh", "-c", "exit 0", "sh"}, odd...)
	before := d.rootsOf(t, "fast-argv")
	res := fast(nil, append([]string{"exec", "--session", "fast-argv", "--"}, argv...)...)
	if res.code != 0 || goStarted(res.stderr) {
		t.Fatalf("exit %d, Go started %v: %q", res.code, goStarted(res.stderr), withoutInitTrace(res.stderr))
	}
	added := newRoots(before, d.rootsOf(t, "fast-argv"))
	if len(added) != 1 || !slices.Equal(added[0].Command, argv) {
		t.Errorf("recorded %q, want one root with the command %q", added, argv)
	}

	bad := []string{"sh", "-c", "exit 0", "sh", "x\xffy", "\xc0\xaf", "\xed\xa0\x80"}
	var got [][]string
	for _, run := range []execRunner{fast, ref} {
		before := d.rootsOf(t, "fast-argv")
		res := run(nil, append([]string{"exec", "--session", "fast-argv", "--"}, bad...)...)
		if res.code != 0 || !goStarted(res.stderr) {
			t.Errorf("not UTF-8: exit %d, Go started %v (want Go's path): %q", res.code, goStarted(res.stderr), withoutInitTrace(res.stderr))
		}
		for _, r := range newRoots(before, d.rootsOf(t, "fast-argv")) {
			got = append(got, r.Command)
		}
	}
	if len(got) != 2 || !slices.Equal(got[0], got[1]) {
		t.Errorf("not UTF-8: recorded %q through the fast binary and Go's, want the same twice", got)
	}
}

// newRoots are the roots in after that aren't in before.
func newRoots(before, after map[lineage.Identity]api.Root) []api.Root {
	var out []api.Root
	for id, r := range after {
		if _, ok := before[id]; !ok {
			out = append(out, r)
		}
	}
	return out
}

// What the fast path doesn't take ends as Go's path ends it: the same
// exit status and messages, and the daemon changed as much.
func testExecFastFallsBack(t *testing.T, d *daemon, fast, ref execRunner) {
	garbage := filepath.Join(t.TempDir(), "garbage")
	if err := os.WriteFile(garbage, []byte("not a program\x00\x01"), 0o755); err != nil {
		t.Fatal(err)
	}
	profile := filepath.Join(t.TempDir(), "cpu.prof")
	cases := []struct {
		name   string
		env    []string
		args   []string
		goRuns bool // the fast binary starts Go
	}{
		{"invalid session", nil, []string{"--session", "a b/c", "--kind", "autonomous", "--", "true"}, true},
		{"unknown kind", nil, []string{"--session", "fast-kind", "--kind", "bogus", "--", "sh", "-c", "echo ran"}, true},
		{"no daemon", []string{client.EnvSocket + "=/nonexistent/lineage.sock"}, []string{"--session", "fast-x", "--", "true"}, true},
		{"not found", nil, []string{"--session", "fast-x", "--", "no-such-command-lineage-test"}, true},
		{"no session", nil, []string{"--", "true"}, true},
		{"no command", nil, []string{"--session", "fast-x"}, true},
		{"unknown flag", nil, []string{"--session", "fast-x", "--bogus", "--", "true"}, true},
		// --join is Go's to send: no session to join here, so both refuse.
		{"join", nil, []string{"--session", "fast-join", "--join", "--", "true"}, true},
		{"help", nil, []string{"--help"}, true},
		{"relative PATH entry", []string{"PATH=.:" + os.Getenv("PATH")}, []string{"--session", "fast-x", "--", "true"}, true},
		{"profile", []string{"LINEAGE_CPUPROFILE=" + profile}, []string{"--session", "fast-x", "--", "true"}, true},
		// Registered, then the execve fails: the fast path's own message.
		{"exec fails", nil, []string{"--session", "fast-x", "--", garbage}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			a := fast(c.env, append([]string{"exec"}, c.args...)...)
			b := ref(c.env, append([]string{"exec"}, c.args...)...)
			if goStarted(a.stderr) != c.goRuns {
				t.Errorf("the fast binary started Go: %v, want %v; stderr %q", goStarted(a.stderr), c.goRuns, withoutInitTrace(a.stderr))
			}
			sameOutcome(t, a, b)
		})
	}
	// The daemon refuses an unknown kind (400): Go's path says so, and
	// nothing ran or was registered.
	res := fast(nil, "exec", "--session", "fast-kind", "--kind", "bogus", "--", "sh", "-c", "echo ran")
	if res.code == 0 || strings.Contains(res.stdout, "ran") || !strings.Contains(res.stderr, `kind "bogus"`) {
		t.Errorf("--kind bogus: exit %d, stdout %q, stderr %q; want refused, naming the kind", res.code, res.stdout, withoutInitTrace(res.stderr))
	}
	if roots := d.rootsOf(t, "fast-kind"); roots != nil {
		t.Errorf("--kind bogus opened session fast-kind with roots %v", roots)
	}
}

// A member registering itself elsewhere is refused (409): the fast path's
// request changed nothing, and Go's path says why. The outer and inner
// exec are both the fast binary's, or both Go's path.
func testExecFastMemberElsewhere(t *testing.T, d *daemon, fast, ref execRunner, slow string) {
	nested := `"$0" exec --session fast-other -- true; echo "inner exit $?"`
	var res []binResult
	for _, c := range []struct {
		run execRunner
		bin string
	}{{fast, frontBin}, {ref, slow}} {
		res = append(res, c.run(nil, "exec", "--session", "fast-member", "--", "sh", "-c", nested, c.bin))
	}
	if !strings.Contains(res[0].stdout, "inner exit ") || strings.Contains(res[0].stdout, "inner exit 0") {
		t.Errorf("the inner exec: %q, want it refused", res[0].stdout)
	}
	if !goStarted(res[0].stderr) {
		t.Errorf("the refused inner exec did not fall back to Go's path: %q", withoutInitTrace(res[0].stderr))
	}
	sameOutcome(t, res[0], res[1])
	if n := len(d.rootsOf(t, "fast-member")); n != 2 {
		t.Errorf("session fast-member has %d roots, want the two outer shells", n)
	}
	if got := d.rootsOf(t, "fast-other"); len(got) != 0 {
		t.Errorf("a member registered itself in another session: %v", got)
	}
}

// digits are the pids and start times that differ from run to run.
var digits = regexp.MustCompile(`[0-9]+`)

// sameOutcome checks that a run through the fast binary ended as Go's path
// ended it: the same exit status and output, pids and times aside.
func sameOutcome(t *testing.T, a, b binResult) {
	t.Helper()
	norm := func(s string) string { return digits.ReplaceAllString(withoutInitTrace(s), "N") }
	if a.code != b.code || norm(a.stdout) != norm(b.stdout) || norm(a.stderr) != norm(b.stderr) {
		t.Errorf("fast binary: exit %d, stdout %q, stderr %q\nGo's path:   exit %d, stdout %q, stderr %q",
			a.code, a.stdout, withoutInitTrace(a.stderr), b.code, b.stdout, withoutInitTrace(b.stderr))
	}
}

// A CPU profile asked of lineage exec (LINEAGE_CPUPROFILE) is written out
// before the command is exec'd: its timer (ITIMER_PROF) would survive the
// exec, and its SIGPROF kill a command that runs 10 ms of CPU.
func TestExecCPUProfileEndsBeforeTheCommand(t *testing.T) {
	d := startDaemon(t, "")
	profile := filepath.Join(t.TempDir(), "cpu.prof")
	res := runBin(t, frontBin, []string{client.EnvSocket + "=" + d.sock, "LINEAGE_CPUPROFILE=" + profile},
		"exec", "--session", "profiled", "--", "sh", "-c", "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; echo done")
	if res.code != 0 || res.stdout != "done\n" {
		t.Errorf("a CPU-bound command under a profiled lineage exec: exit %d, stdout %q, stderr %q; want it to finish", res.code, res.stdout, res.stderr)
	}
	if st, err := os.Stat(profile); err != nil || st.Size() == 0 {
		t.Errorf("the profile was not written before the exec: %v", err)
	}
}
