package e2e

import (
	"fmt"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// A member of a session opened with self_close may close that session and
// no other: the close ends the rest of the lineage and spares the caller's
// chain (the client, the shell that runs it, the root).
func TestServeSelfCloseOnlyItsOwnSession(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "a", Kind: "autonomous", SelfClose: true}, nil)
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "b", SelfClose: true}, nil)
	bin := `LINEAGE_SOCKET=` + d.sock + ` "$LINEAGE_BIN"`
	script := fmt.Sprintf(`setsid sleep %[2]s >/dev/null 2>&1 &
		%[1]s session close b; echo "close-b $?"
		%[1]s session close a; echo "close-a $?"
		echo "root alive"`, bin, testutil.Sleep(mark))
	cmd := lineageCmd("exec", "--session", "a", "--", "sh", "-c", script)
	cmd.Env = append(cmd.Env, "LINEAGE_SOCKET="+d.sock, "LINEAGE_BIN="+frontBin)
	raw, err := cmd.CombinedOutput()
	out := string(raw)
	if err != nil {
		t.Fatalf("the root: %v\n%s", err, out)
	}
	// The leftover was forked before the close: it is terminated, whether
	// or not it had run sleep yet.
	for _, want := range []string{"403 forbidden", "\nclose-b 125\n", "\nclose-a 0\n", "\tterminated\tTERM\t", "\nroot alive\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("no %q in the root's output:\n%s", want, out)
		}
	}
	if left := sleepers(mark); len(left) > 0 {
		t.Errorf("the close left %v", left)
	}
	d.do("GET", "/v1/sessions/b", nil, nil)
	if code := d.apiStatus("GET", "/v1/sessions/a", nil); code != 404 {
		t.Errorf("session a after its close: %d, want 404", code)
	}
}

// self_close is part of the state a restarted daemon takes back.
func TestServeSelfCloseSurvivesRestart(t *testing.T) {
	d := startDaemon(t, "")
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "hooks", SelfClose: true}, nil)
	d.do("POST", "/v1/sessions", api.OpenSession{ID: "plain"}, nil)
	d.kill9()
	d.start()
	var hooks, plain api.Session
	d.do("GET", "/v1/sessions/hooks", nil, &hooks)
	d.do("GET", "/v1/sessions/plain", nil, &plain)
	if !hooks.SelfClose || plain.SelfClose {
		t.Errorf("after a restart: hooks self_close %v (want true), plain %v (want false)", hooks.SelfClose, plain.SelfClose)
	}
}
