package guardian

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// sleeper starts a finite sleeper carrying mark and returns its identity.
func sleeper(t *testing.T, mark string) lineage.Identity {
	t.Helper()
	cmd := exec.Command("sleep", testutil.Sleep(mark))
	// Out of the test's process group, which the reaper protects.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = cmd.Wait() }()
	start, _, err := testutil.StartTicks(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	return lineage.Identity{PID: uint32(cmd.Process.Pid), StartTicks: start}
}

func helloLine(t *testing.T, reaping policy.Reaping) string {
	t.Helper()
	// The test's own parent stands in for lineage: it is protected.
	h := hello{Version: version, Backend: backendProc, Grace: time.Second, Reaping: reaping,
		Caller: policy.Caller{PID: 99999999}}
	return string(encode(message{Hello: &h}))
}

func idLine(kind string, id lineage.Identity) string {
	return fmt.Sprintf(`{%q:{"pid":%d,"start":%d}}`+"\n", kind, id.PID, id.StartTicks)
}

func TestServe(t *testing.T) {
	cases := []struct {
		name   string
		tail   func(root, member lineage.Identity) string
		off    bool
		reaped bool
		err    error
	}{
		{"done touches nothing", func(r, m lineage.Identity) string {
			return idLine("root", r) + idLine("member", m) + `{"done":true}` + "\n"
		}, false, false, nil},
		{"the pipe's end reaps", func(r, m lineage.Identity) string { return idLine("root", r) + idLine("member", m) }, false, true, nil},
		{"the pipe's end with reaping off", func(r, m lineage.Identity) string { return idLine("root", r) + idLine("member", m) }, true, false, nil},
		{"no root, nothing to guard", func(r, m lineage.Identity) string { return "" }, false, false, nil},
		{"garbage disarms", func(r, m lineage.Identity) string { return idLine("root", r) + "kill everything\n" }, false, false, ErrDisarmed},
		{"pid 1 disarms", func(r, m lineage.Identity) string { return idLine("root", r) + `{"member":{"pid":1,"start":1}}` + "\n" }, false, false, ErrDisarmed},
		{"unknown field disarms", func(r, m lineage.Identity) string { return idLine("root", r) + `{"reap_all":true}` + "\n" }, false, false, ErrDisarmed},
		{"a member before the root disarms", func(r, m lineage.Identity) string { return idLine("member", m) + idLine("root", r) }, false, false, ErrDisarmed},
		{"a second root disarms", func(r, m lineage.Identity) string { return idLine("root", r) + idLine("root", m) }, false, false, ErrDisarmed},
		{"an overlong line disarms", func(r, m lineage.Identity) string { return idLine("root", r) + strings.Repeat("x", MaxLine+1) + "\n" }, false, false, ErrDisarmed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mark := testutil.Marker(t)
			testutil.CheckNoLeaks(t, mark)
			root, member := sleeper(t, mark), sleeper(t, mark)
			in := helloLine(t, policy.Reaping{Off: c.off, By: "test"}) + c.tail(root, member)
			var stderr strings.Builder
			err := Serve(strings.NewReader(in), ServeOptions{Stderr: &stderr})
			if !errors.Is(err, c.err) || (c.err == nil && err != nil) {
				t.Fatalf("Serve: %v, want %v; stderr:\n%s", err, c.err, stderr.String())
			}
			for _, id := range []lineage.Identity{root, member} {
				gone := !testutil.Alive(int(id.PID), id.StartTicks)
				if c.reaped {
					gone = testutil.WaitGone(int(id.PID), id.StartTicks, 3*time.Second)
				}
				if gone != c.reaped {
					t.Errorf("%s gone: %v, want %v; stderr:\n%s", id, gone, c.reaped, stderr.String())
				}
				testutil.KillIdentity(int(id.PID), id.StartTicks)
			}
		})
	}
}

func TestServeRefusesABadHello(t *testing.T) {
	for name, in := range map[string]string{
		"not json":               "hello\n",
		"member first":           `{"member":{"pid":1234,"start":5}}` + "\n",
		"other version":          `{"hello":{"version":2,"caller":{"PID":5},"grace":1000000000,"backend":"proc"}}` + "\n",
		"no grace":               `{"hello":{"version":1,"caller":{"PID":5},"grace":0,"backend":"proc"}}` + "\n",
		"no caller":              `{"hello":{"version":1,"grace":1000000000,"backend":"proc"}}` + "\n",
		"unknown backend":        `{"hello":{"version":1,"caller":{"PID":5},"grace":1000000000,"backend":"cgroup"}}` + "\n",
		"bpf with no files":      `{"hello":{"version":1,"caller":{"PID":5},"grace":1000000000,"backend":"bpf"}}` + "\n",
		"bpf with files we lack": `{"hello":{"version":1,"caller":{"PID":5},"grace":1000000000,"backend":"bpf","files":3}}` + "\n",
		"two kinds":              `{"done":true,"member":{"pid":1234,"start":5}}` + "\n",
	} {
		t.Run(name, func(t *testing.T) {
			err := Serve(strings.NewReader(in), ServeOptions{})
			if !errors.Is(err, ErrDisarmed) || !errors.Is(err, lineage.ErrInvalid) {
				t.Errorf("Serve: %v, want ErrDisarmed and ErrInvalid", err)
			}
		})
	}
}
