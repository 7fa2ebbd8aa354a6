package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/client"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// doubleForked starts, as a root of session, a shell whose subshell starts
// a setsid-ed sleeper and exits at once: the sleeper is reparented away
// from its creator, which is gone. It returns the sleeper.
func doubleForked(t *testing.T, d *daemon, session, mark string) testutil.Proc {
	t.Helper()
	d.execRoot(session, "interactive", fmt.Sprintf(
		"sh -c 'middle=%[1]s; setsid sleep %[2]s & exit 0'; sleep 0.2; exit 0", mark, testutil.Sleep(mark)))
	ps := atLeastSleepers(t, mark, 1)
	return ps[0]
}

// checkWhyChain checks a why answer for the double-forked sleeper: sleeper,
// the exited middle shell that started it, the root shell.
func checkWhyChain(t *testing.T, how string, v api.Why, sleeper testutil.Proc, mark string) {
	t.Helper()
	if len(v.Chain) != 3 || !v.Complete {
		t.Fatalf("%s: chain of %d steps (complete %v), want sleeper, middle shell, root: %+v", how, len(v.Chain), v.Complete, v)
	}
	me, middle, root := v.Chain[0], v.Chain[1], v.Chain[2]
	if int(me.Process.PID) != sleeper.PID || me.Process.StartTicks != sleeper.StartTicks || !me.Alive {
		t.Errorf("%s: first step %+v, want the live sleeper %d", how, me, sleeper.PID)
	}
	if me.Parent != middle.Process || middle.Parent != root.Process {
		t.Errorf("%s: steps are not each other's lineage parents: %+v", how, v.Chain)
	}
	if me.PPID == int(middle.Process.PID) || me.PPID == 0 {
		t.Errorf("%s: the sleeper's ppid %d: want it reparented away from its creator", how, me.PPID)
	}
	if middle.Alive || middle.Exit != "exit 0" || !strings.Contains(strings.Join(middle.Argv, " "), "middle="+mark) {
		t.Errorf("%s: middle step %+v, want the exited shell that started the sleeper", how, middle)
	}
	if !root.IsRoot || root.Session != "why" || !strings.Contains(strings.Join(root.Argv, " "), "sh -c 'middle=") {
		t.Errorf("%s: last step %+v, want the session's root shell", how, root)
	}
}

// `lineage why` names the shell that started a double-forked, reparented
// process, through the CLI and curl; bad input gets 4xx and a clear
// message; uid 65534 may not see root's session; an untracked process gets
// its /proc chain, marked.
func TestWhyNamesTheShellThatStartedADoubleFork(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	sleeper := doubleForked(t, d, "why", mark)
	id := fmt.Sprintf("%d@%d", sleeper.PID, sleeper.StartTicks)

	var v api.Why
	d.do("GET", "/v1/why/"+id, nil, &v)
	checkWhyChain(t, "API", v, sleeper, mark)

	out, code := d.run("why", "--json", strconv.Itoa(sleeper.PID))
	var cli api.Why
	if err := json.Unmarshal([]byte(out), &cli); code != 0 || err != nil {
		t.Fatalf("lineage why --json: exit %d, %v: %s", code, err, out)
	}
	checkWhyChain(t, "CLI --json", cli, sleeper, mark)
	text, code := d.run("why", id)
	if code != 0 || !strings.Contains(text, "middle="+mark) || !strings.Contains(text, "exited: exit 0") {
		t.Errorf("lineage why: exit %d, want the middle shell named:\n%s", code, text)
	}

	curl := testutil.LookTool(t, "curl")
	raw, err := exec.Command(curl, "-s", "--unix-socket", d.sock, "http://x/v1/why/"+id).Output()
	var viaCurl api.Why
	if err == nil {
		err = json.Unmarshal(raw, &viaCurl)
	}
	if err != nil {
		t.Fatalf("curl: %v: %s", err, raw)
	}
	checkWhyChain(t, "curl", viaCurl, sleeper, mark)

	whyRefusesBadInput(t, d, sleeper)
	whyWithoutAnswer(t, d)
	n := asNobody(t, d)
	// Root's process is, to another uid, as one not tracked.
	n.refused("404 not_found", "why", id)

	d.do("POST", "/v1/sessions/why/close", nil, nil)
	allGone(t, []testutil.Proc{sleeper})
}

func whyRefusesBadInput(t *testing.T, d *daemon, sleeper testutil.Proc) {
	t.Helper()
	for path, want := range map[string]int{
		"/v1/why/1":       http.StatusBadRequest,
		"/v1/why/0":       http.StatusBadRequest,
		"/v1/why/abc":     http.StatusBadRequest,
		"/v1/why/5@x":     http.StatusBadRequest,
		"/v1/why/1@1000":  http.StatusBadRequest,
		"/v1/why/-3":      http.StatusBadRequest,
		"/v1/why/4194305": http.StatusNotFound, // over any pid_max
		fmt.Sprintf("/v1/why/%d@%d", sleeper.PID, sleeper.StartTicks+1): http.StatusNotFound,
		fmt.Sprintf("/v1/why/%d", os.Getpid()):                          http.StatusNotFound, // not tracked
	} {
		if got := d.apiStatus("GET", path, nil); got != want {
			t.Errorf("GET %s: %d, want %d", path, got, want)
		}
	}
	if out, code := d.run("why", "garbage"); code == 0 || out != "" {
		t.Errorf("lineage why garbage: exit %d %q, want a failure", code, out)
	}
}

// whyWithoutAnswer: an untracked process, or no daemon at all, is said so
// plainly, with the /proc parent chain marked as such, and exit status 1.
func whyWithoutAnswer(t *testing.T, d *daemon) {
	t.Helper()
	self := strconv.Itoa(os.Getpid())
	for _, sock := range []string{d.sock, filepath.Join(t.TempDir(), "none.sock")} {
		cmd := lineageCmd("why", self)
		cmd.Env = append(cmd.Env, client.EnvSocket+"="+sock)
		var out, errb strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &errb
		err := cmd.Run()
		if cmd.ProcessState == nil || cmd.ProcessState.ExitCode() != whyNotTracked {
			t.Errorf("lineage why on an untracked process (socket %s): %v, want exit %d", sock, err, whyNotTracked)
		}
		if !strings.Contains(errb.String(), "no lineage chain") || !strings.Contains(out.String(), "/proc parent chain") ||
			!strings.Contains(out.String(), self+"@") {
			t.Errorf("lineage why on an untracked process: stdout %q stderr %q", out.String(), errb.String())
		}
	}
}

// whyNotTracked is `lineage why`'s exit status for a process the daemon
// does not track.
const whyNotTracked = 1
