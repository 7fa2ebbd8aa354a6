package job

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

func TestEndExitCode(t *testing.T) {
	for _, c := range []struct {
		end  End
		want int
	}{
		{End{Exited: true, Status: 3 << 8}, 3},
		{End{Exited: true, Status: 0}, 0},
		{End{Exited: true, Status: 9}, 137},
		{End{Exited: true, Status: 15}, 143},
		{End{Deadline: true, Exited: true, Status: 9}, lineage.ExitDeadline},
		{End{Deadline: true}, lineage.ExitDeadline},
		{End{}, lineage.ExitFailure},
	} {
		if got := c.end.ExitCode(); got != c.want {
			t.Errorf("%+v: exit %d, want %d", c.end, got, c.want)
		}
	}
}

func TestEndEvent(t *testing.T) {
	if ev := (End{Deadline: true, Exited: true}).Event(); ev != policy.Deadline {
		t.Errorf("deadline: %v", ev)
	}
	// A wait cut short by a second signal is the root's exit, as far as
	// the policy is concerned: it is reaped as usual.
	for _, end := range []End{{Exited: true}, {}} {
		if ev := end.Event(); ev != policy.RootExit {
			t.Errorf("%+v: %v", end, ev)
		}
	}
}

// TestLookPathStartErrors checks the exit statuses of a command that
// can't be started.
func TestLookPathStartErrors(t *testing.T) {
	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		command string
		want    int
	}{
		{"lineage-no-such-command", lineage.ExitNotFound},
		{filepath.Join(t.TempDir(), "missing"), lineage.ExitNotFound},
		{notExec, lineage.ExitCannotRun},
	} {
		_, err := LookPath(c.command)
		var start *StartError
		if !errors.As(err, &start) || start.Code != c.want {
			t.Errorf("%s: %v, want a start error with exit %d", c.command, err, c.want)
		}
	}
	if path, err := LookPath("sh"); err != nil || !filepath.IsAbs(path) {
		t.Errorf("sh: %q, %v", path, err)
	}
}
