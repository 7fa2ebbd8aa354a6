package tracker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/lineage"
)

// TestRunStartErrors checks the exit statuses of a command that can't be
// started; the lookup fails before anything is opened or spawned.
func TestRunStartErrors(t *testing.T) {
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
		_, _, err := Run(context.Background(), Config{Config: job.Config{Spec: job.Spec{Command: []string{c.command}}}})
		var start *job.StartError
		if !errors.As(err, &start) || start.Code != c.want {
			t.Errorf("%s: %v, want a start error with exit %d", c.command, err, c.want)
		}
	}
}
