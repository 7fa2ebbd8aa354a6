package cli

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

func TestNewCmdRunParsesFlags(t *testing.T) {
	var got *runOptions
	var stdout, stderr bytes.Buffer
	cmd := NewCmdRun(Streams{Out: &stdout, Err: &stderr}, nil, func(o *runOptions) error {
		got = o
		return nil
	})
	cmd.SetArgs([]string{"--backend", "PROC", "--deadline", "30m", "--linger", "2s", "--grace", "3s",
		"--keep", "exe:/bin/sh", "--reaping", "off", "--interval", "250ms", "--report", "r.json",
		"--", "make", "-j4", "--keep", "test"})
	cmd.SetOut(&stdout)
	cmd.SetErr(&stderr)
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if got == nil {
		t.Fatal("runF was not called")
	}
	if got.backend != loader.BackendProc || got.Deadline != 30*time.Minute || got.Linger != 2*time.Second ||
		got.Grace != 3*time.Second || got.interval != 250*time.Millisecond || got.ReportFile != "r.json" {
		t.Errorf("options %+v", got)
	}
	// Flags after -- belong to the command.
	if want := []string{"make", "-j4", "--keep", "test"}; !slices.Equal(got.Command, want) {
		t.Errorf("command %q, want %q", got.Command, want)
	}
	// An exe rule keeps its text, and names its program to the kernel.
	if len(got.keep) != 1 || got.keep[0].String() != "exe:/bin/sh" {
		t.Errorf("keep rules %v", got.keep)
	} else if _, ok := got.keep[0].File(); !ok {
		t.Errorf("keep rule %v names no file", got.keep[0])
	}
	if !got.reaping.Off {
		t.Errorf("reaping %v, want off", got.reaping)
	}
}

func TestNewCmdRunFlagsStopAtTheCommand(t *testing.T) {
	var got *runOptions
	cmd := NewCmdRun(Streams{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, nil, func(o *runOptions) error { got = o; return nil })
	// Without --, the first non-flag argument starts the command.
	cmd.SetArgs([]string{"--grace", "1s", "sh", "-c", "exit 0", "--deadline", "1s"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"sh", "-c", "exit 0", "--deadline", "1s"}; !slices.Equal(got.Command, want) {
		t.Errorf("command %q, want %q", got.Command, want)
	}
	if got.Deadline != 0 {
		t.Errorf("the command's --deadline was taken as lineage's")
	}
}

func TestRunOptionsKillSwitchFromEnvironment(t *testing.T) {
	for _, c := range []struct {
		env, flag string
		off       bool
		wantErr   bool
	}{
		{"", "", false, false},
		{"off", "", true, false},
		{"on", "off", false, false},
		{"off", "on", true, false},
		{"", "off", true, false},
		{"maybe", "", false, true},
		{"OFF", "", true, false},
		{" 0 ", "on", true, false},
		{"", "Disabled", true, false},
		{"", "YES", false, false},
		{"offf", "", false, true},
	} {
		var got *runOptions
		cmd := NewCmdRun(Streams{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, nil, func(o *runOptions) error { got = o; return nil })
		args := []string{}
		if c.flag != "" {
			args = append(args, "--reaping", c.flag)
		}
		cmd.SetArgs(append(args, "--", "true"))
		t.Setenv(policy.EnvReaping, c.env)
		err := cmd.Execute()
		if c.wantErr {
			if err == nil || !errors.Is(err, lineage.ErrInvalid) {
				t.Errorf("env %q: %v, want an invalid-value error", c.env, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("env %q flag %q: %v", c.env, c.flag, err)
		}
		if got.reaping.Off != c.off {
			t.Errorf("env %q flag %q: reaping %v", c.env, c.flag, got.reaping)
		}
	}
}

func TestRunOnFullFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
		ok   bool
	}{
		{nil, "kill", true},
		{[]string{"--on-full", "escape"}, "escape", true},
		{[]string{"--on-full", "ignore"}, "", false},
	} {
		var got *runOptions
		var out bytes.Buffer
		cmd := NewCmdRun(Streams{Out: &out, Err: &out}, nil, func(o *runOptions) error { got = o; return nil })
		cmd.SetArgs(append(c.args, "--", "true"))
		cmd.SetOut(&out)
		cmd.SetErr(&out)
		err := cmd.Execute()
		if (err == nil) != c.ok {
			t.Errorf("%v: error %v", c.args, err)
			continue
		}
		if c.ok && (got == nil || got.OnFull != c.want) {
			t.Errorf("%v: options %+v, want on full %q", c.args, got, c.want)
		}
	}
}

// A run the front handed over asks no daemon, and says nothing of the
// choice the front has already said (-v printed it twice).
func TestHandedRunAsksNoDaemon(t *testing.T) {
	args := HandedArgs([]string{"run", "-v", "--", "sleep", "1"})
	if want := []string{"run", "--handed", "-v", "--", "sleep", "1"}; !slices.Equal(args, want) {
		t.Fatalf("handed args %q, want %q", args, want)
	}
	var got *runOptions
	var stderr bytes.Buffer
	cmd := NewCmdRun(Streams{Out: &bytes.Buffer{}, Err: &stderr}, nil, func(o *runOptions) error { got = o; return nil })
	// An unreachable daemon, were it asked.
	t.Setenv("LINEAGE_SOCKET", filepath.Join(t.TempDir(), "none.sock"))
	cmd.SetArgs(args[1:])
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	if !got.Handed || !got.Verbose || !slices.Equal(got.Command, []string{"sleep", "1"}) {
		t.Fatalf("options %+v", got)
	}
	if r := got.daemon(context.Background()); r != nil || stderr.Len() != 0 {
		t.Errorf("a handed run asked the daemon (%v) or said so: %q", r, stderr.String())
	}
	got.Handed = false
	if r := got.daemon(context.Background()); r != nil || !strings.Contains(stderr.String(), "lineage: standalone: no daemon to use at ") {
		t.Errorf("a run not handed: %v, %q", r, stderr.String())
	}
}
