package client

import (
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/lineage-dev/lineage/api"
)

// With no daemon, Start fails with ErrNoDaemon and runs nothing.
func TestCommandWithoutADaemonRunsNothing(t *testing.T) {
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	c := New(filepath.Join(dir, "no.sock"))
	cmd := c.Command("s1", "touch", marker)
	cmd.Lineage = "/bin/sh" // never reached
	if err := cmd.Run(); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("Run: %v, want ErrNoDaemon", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran without a daemon")
	}
	if cmd.Process != nil {
		t.Error("a process was started")
	}
}

// A command or a lineage binary that can't be found is an error at
// Start, as os/exec's is.
func TestCommandNotFound(t *testing.T) {
	c := New(filepath.Join(t.TempDir(), "no.sock"))
	if err := c.Command("s1", "no-such-command-here").Run(); err == nil || !strings.Contains(err.Error(), "no-such-command-here") {
		t.Errorf("Run of a missing command: %v", err)
	}
	cmd := c.Command("s1", "true")
	cmd.Lineage = "no-such-lineage-binary"
	if err := cmd.Run(); err == nil || !strings.Contains(err.Error(), EnvLineage) {
		t.Errorf("Run with a missing lineage binary: %v, want one that names $%s", err, EnvLineage)
	}
	if err := c.Command("s1", "true").Wait(); err == nil {
		t.Error("Wait before Start: no error")
	}
}

func TestSameWriterAndPrefixBuffer(t *testing.T) {
	var a, b strings.Builder
	if !sameWriter(&a, &a) || sameWriter(&a, &b) {
		t.Error("sameWriter on pointers")
	}
	type notComparable struct{ f []int }
	if sameWriter(writerFunc{notComparable{}}, writerFunc{notComparable{}}) {
		t.Error("sameWriter of values that can't be compared")
	}
	p := &prefixBuffer{max: 4}
	p.Write([]byte("abc"))
	if n, err := p.Write([]byte("defg")); n != 4 || err != nil {
		t.Errorf("Write = %d, %v", n, err)
	}
	if string(p.Bytes()) != "abcd" {
		t.Errorf("prefix %q", p.Bytes())
	}
}

type writerFunc struct{ v any }

func (writerFunc) Write(b []byte) (int, error) { return len(b), nil }

// An empty session is refused by Start, and by Run, Output and
// CombinedOutput through it, before anything is sent or run: asked for,
// the daemon would open a session of its naming.
func TestCommandWithAnEmptySessionRunsNothing(t *testing.T) {
	var asked atomic.Int32
	sock := serveUnix(t, func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		w.WriteHeader(http.StatusNotFound)
	})
	marker := filepath.Join(t.TempDir(), "ran")
	c := New(sock)
	for name, run := range map[string]func(*Command) error{
		"Start":          (*Command).Start,
		"Run":            (*Command).Run,
		"Output":         func(cmd *Command) error { _, err := cmd.Output(); return err },
		"CombinedOutput": func(cmd *Command) error { _, err := cmd.CombinedOutput(); return err },
	} {
		cmd := c.Command("", "touch", marker)
		cmd.Lineage = "/bin/sh" // never reached
		if err := run(cmd); !errors.Is(err, errEmptyID) || !strings.Contains(err.Error(), "Session") {
			t.Errorf("%s: %v, want an error naming the empty Session", name, err)
		}
		if cmd.Process != nil {
			t.Errorf("%s started a process", name)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("%d requests sent", n)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the command ran")
	}
}

// A session the daemon refuses to open is an *APIError from Start, and
// nothing runs.
func TestCommandInARefusedSessionRunsNothing(t *testing.T) {
	sock := serveUnix(t, func(w http.ResponseWriter, r *http.Request) {
		status, code := http.StatusNotFound, api.CodeNotFound
		if r.Method == http.MethodPost {
			status, code = http.StatusBadRequest, api.CodeInvalid
		}
		w.WriteHeader(status)
		_ = json.NewEncoder(w).Encode(api.Error{Error: "no", Code: code})
	})
	marker := filepath.Join(t.TempDir(), "ran")
	cmd := New(sock).Command("a b", "touch", marker)
	cmd.Lineage = "/bin/sh" // never reached
	var ae *APIError
	if err := cmd.Start(); !errors.As(err, &ae) || ae.Body.Code != api.CodeInvalid {
		t.Errorf("Start: %v, want the daemon's refusal", err)
	}
	if _, err := os.Stat(marker); err == nil || cmd.Process != nil {
		t.Error("the command ran")
	}
}

// A session another uid opened is a conflict from Start, and nothing runs:
// seen (as root sees it) or unseen (an unprivileged caller is told only
// that the id is taken when it tries to open it).
func TestCommandInAnotherUIDsSessionRunsNothing(t *testing.T) {
	other := uint32(os.Geteuid()) + 1
	for _, visible := range []bool{true, false} {
		sock := serveUnix(t, func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodGet && visible {
				_ = json.NewEncoder(w).Encode(api.Session{ID: "theirs", Kind: "autonomous", UID: other})
				return
			}
			status, code := http.StatusNotFound, api.CodeNotFound
			if r.Method == http.MethodPost {
				status, code = http.StatusConflict, api.CodeConflict
			}
			w.WriteHeader(status)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "taken", Code: code})
		})
		marker := filepath.Join(t.TempDir(), "ran")
		cmd := New(sock).Command("theirs", "touch", marker)
		cmd.Lineage = "/bin/sh" // never reached
		var ae *APIError
		err := cmd.Start()
		if !errors.As(err, &ae) || ae.Body.Code != api.CodeConflict {
			t.Errorf("visible %v: Start: %v, want a conflict", visible, err)
		}
		if visible && (err == nil || !strings.Contains(err.Error(), "opened by uid")) {
			t.Errorf("visible: Start: %v, want the opener named", err)
		}
		if _, err := os.Stat(marker); err == nil || cmd.Process != nil {
			t.Errorf("visible %v: the command ran", visible)
		}
	}
}
