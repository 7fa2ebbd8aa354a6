package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// A leftover that asks the daemon to free itself is refused, changes
// nothing, and is reaped at the turn's end all the same. The rule is
// stricter than "in its own session": a tracked process may change no
// session at all (the issue's own test: closing another session is
// refused), since an agent host's sessions share its uid. It may read.
func TestServeLeftoverCannotFreeItself(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "other"}, nil)
	out := filepath.Join(t.TempDir(), "answers")
	bin := `LINEAGE_SOCKET=` + d.sock + ` "$LINEAGE_BIN"`
	me := `$$@$(cut -d' ' -f22 /proc/$$/stat)`
	leftover := fmt.Sprintf(`
		%[1]s keep %[2]s; echo "keep $?"
		%[1]s keep --root "$ROOT"; echo "keep-root $?"
		%[1]s keep --rm %[2]s; echo "keep-rm $?"
		%[1]s roots rm "$ROOT"; echo "rm $?"
		%[1]s turn end self; echo "turn $?"
		%[1]s session close other; echo "close-other $?"
		%[1]s session close self; echo "close-self $?"
		%[1]s session report self >/dev/null; echo "report 0$?"
		%[1]s roots ls --session other >/dev/null; echo "ls-other 0$?"
		echo done
		exec sleep %[3]s`, bin, me, testutil.Sleep(mark))
	script := fmt.Sprintf(`export ROOT=%s; setsid sh -c '%s' >%s 2>&1 & sleep 0.2`, me, strings.ReplaceAll(leftover, "'", `'\''`), out)
	cmd := lineageCmd("exec", "--session", "self", "--kind", "autonomous", "--", "sh", "-c", script)
	cmd.Env = append(cmd.Env, "LINEAGE_SOCKET="+d.sock, "LINEAGE_BIN="+frontBin)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("exec: %v: %s", err, msg)
	}
	var answers string
	for deadline := time.Now().Add(20 * time.Second); !strings.Contains(answers, "done"); {
		if time.Now().After(deadline) {
			t.Fatalf("the leftover did not finish asking: %q", answers)
		}
		time.Sleep(50 * time.Millisecond)
		raw, _ := os.ReadFile(out)
		answers = string(raw)
	}
	for _, what := range []string{"keep", "keep-root", "keep-rm", "rm", "turn", "close-other", "close-self"} {
		if !strings.Contains(answers, "\n"+what+" 125\n") {
			t.Errorf("%s was not refused", what)
		}
	}
	// It may still read, its own session and another: only changes are
	// refused.
	for _, what := range []string{"report", "ls-other"} {
		if !strings.Contains(answers, "\n"+what+" 00\n") {
			t.Errorf("%s was refused:\n%s", what, answers)
		}
	}
	if got := strings.Count(answers, "403 forbidden"); got != 7 {
		t.Errorf("%d answers 403, want 7:\n%s", got, answers)
	}
	left := atLeastSleepers(t, mark, 1)
	var s api.Session
	d.do("GET", "/v1/sessions/self", nil, &s)
	if len(s.Roots) != 1 || len(s.Keeps) != 0 {
		t.Errorf("the session changed: %+v", s)
	}
	d.do("GET", "/v1/sessions/other", nil, nil)
	d.do("POST", "/v1/sessions/self/turn-end", nil, nil)
	allGone(t, left)
}
