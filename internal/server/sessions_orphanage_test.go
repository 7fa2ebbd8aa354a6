package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// A caller declares itself a root's orphanage only as the root's parent:
// the daemon says it takes orphanages, shows the caller's identity as the
// root's orphanage, and keeps it in its state; a root another process
// started is refused, and nothing is registered.
func TestOrphanageIsTheRootsParent(t *testing.T) {
	l := startLiveServer(t)
	var status api.Status
	l.do("GET", "/v1/status", nil, &status)
	if !strings.Contains(strings.Join(status.Features, " "), api.FeatureOrphanage) {
		t.Errorf("status features %q, want %q among them", status.Features, api.FeatureOrphanage)
	}
	self, err := proc.Self()
	if err != nil {
		t.Fatal(err)
	}

	// A grandchild: its parent is the shell, not the caller.
	dir := t.TempDir()
	pidFile := dir + "/pid"
	sh := exec.Command("sh", "-c", fmt.Sprintf("sleep %s & echo $! >%s.tmp; mv %[2]s.tmp %[2]s; wait", testutil.Sleep(l.mark), pidFile))
	if err := sh.Start(); err != nil {
		t.Fatal(err)
	}
	l.procs = append(l.procs, sh)
	var grandchild int
	deadline := time.Now().Add(10 * time.Second)
	for grandchild == 0 && time.Now().Before(deadline) {
		raw, _ := os.ReadFile(pidFile)
		grandchild, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
		time.Sleep(10 * time.Millisecond)
	}
	if grandchild == 0 {
		t.Fatal("the shell's sleep never started")
	}
	t.Cleanup(func() { testutil.KillIdentity(grandchild, startTicks(grandchild)) })
	code, body := l.post("/v1/roots", api.AddRoot{PID: int64(grandchild), Session: "orph", Kind: "autonomous", Orphanage: true})
	if code != http.StatusBadRequest || !strings.Contains(body, "is not the parent of") {
		t.Errorf("a grandchild with the caller as its orphanage: %d %s, want 400 naming the parent", code, body)
	}
	if code, _ := l.status("GET", "/v1/sessions/orph"); code != http.StatusNotFound {
		t.Errorf("after the refusal the session answers %d, want 404: nothing opened", code)
	}

	// A child of the caller.
	c := exec.Command("sleep", testutil.Sleep(l.mark))
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	l.procs = append(l.procs, c)
	var rt api.Root
	l.do("POST", "/v1/roots", api.AddRoot{PID: int64(c.Process.Pid), Session: "orph", Kind: "autonomous", Orphanage: true}, &rt)
	if rt.Orphanage == nil || *rt.Orphanage != self {
		t.Errorf("the root's orphanage %v, want the caller %v", rt.Orphanage, self)
	}
	var roots []api.Root
	l.do("GET", "/v1/roots?session=orph", nil, &roots)
	if len(roots) != 1 || roots[0].Orphanage == nil || *roots[0].Orphanage != self {
		t.Errorf("roots %+v, want one whose orphanage is %v", roots, self)
	}
	st, _ := loaded(t, l.dir)
	saved := false
	for _, se := range st.Sessions {
		for _, r := range se.Roots {
			saved = saved || r.Root == rt.Root && r.Orphanage != nil && *r.Orphanage == self
		}
	}
	if !saved {
		t.Errorf("the state does not keep the root's orphanage: %+v", st.Sessions)
	}
	// Without the field, no orphanage.
	other := l.root("orph")
	l.do("GET", "/v1/roots?session=orph", nil, &roots)
	for _, r := range roots {
		if r.Root == other && r.Orphanage != nil {
			t.Errorf("a root registered without orphanage shows %v", r.Orphanage)
		}
	}
}

// post sends body and returns the answer's status and body.
func (l *liveServer) post(path string, body any) (int, string) {
	l.t.Helper()
	data, _ := json.Marshal(body)
	resp, err := l.http.Post("http://lineage"+path, "application/json", bytes.NewReader(data))
	if err != nil {
		l.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out)
}
