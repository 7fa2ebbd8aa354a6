package e2e

import (
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// The client commands, text and --json, over one root's life: add (with
// its descendants adopted), ls, show, a second registration refused, rm.
func TestServeRootsCommands(t *testing.T) {
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	// A running shell with a child, registered after the fact.
	sh := exec.Command("sh", "-c", fmt.Sprintf("sleep %s & wait", testutil.Sleep(mark)))
	id := startSleep(t, sh)
	child := atLeastSleepers(t, mark, 1)[0]
	pid, start := ident(t, id)

	out, code := d.run("roots", "add", fmt.Sprint(pid), "--start", fmt.Sprint(start), "--session", "cli", "--label", "shell", "--json")
	var r api.Root
	if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.Root.String() != id || r.Label != "shell" {
		t.Fatalf("roots add: %d %q", code, out)
	}
	if out, _ := d.run("roots", "ls", "--session", "cli"); !strings.Contains(out, id) {
		t.Errorf("roots ls: %q", out)
	}
	out, _ = d.run("roots", "show", id)
	if !strings.Contains(out, fmt.Sprintf("    %d@%d", child.PID, child.StartTicks)) {
		t.Errorf("roots show: the adopted child is not under the root:\n%s", out)
	}
	if _, code := d.run("roots", "add", fmt.Sprint(child.PID), "--session", "cli2"); code == 0 {
		t.Error("a member was registered again as a root")
	}
	if out, code := d.run("session", "ls", "--json"); code != 0 || !strings.Contains(out, `"id": "cli"`) || strings.Contains(out, `"cli2"`) {
		t.Errorf("session ls: %q", out)
	}
	if out, code := d.run("roots", "rm", id); code != 0 || !strings.Contains(out, "untracked "+id) {
		t.Errorf("roots rm: %d %q", code, out)
	}
	// Untracked, then closed: nothing is signalled.
	d.run("session", "close", "cli")
	if !testutil.Alive(child.PID, child.StartTicks) {
		t.Error("an untracked process was killed")
	}
	testutil.KillIdentity(child.PID, child.StartTicks)
}
