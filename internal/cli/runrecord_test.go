package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/lineage"
)

// --record and --report naming one file are refused before anything runs:
// the report would replace the record.
func TestRunRefusesRecordAndReportInOneFile(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, err := range []error{
		os.WriteFile("trace.jsonl", []byte("{}\n"), 0o600),
		os.Symlink("trace.jsonl", "link.jsonl"),
		os.Link("trace.jsonl", "hard.jsonl"),
		os.Symlink(".", "here"),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct{ record, report string }{
		{"same.jsonl", "same.jsonl"},
		{"same.jsonl", "./same.jsonl"},
		{filepath.Join(dir, "same.jsonl"), "same.jsonl"},
		{"here/same.jsonl", "same.jsonl"},
		{"trace.jsonl", "link.jsonl"},
		{"hard.jsonl", "trace.jsonl"},
	} {
		ran := false
		var stderr bytes.Buffer
		s := Streams{Out: &bytes.Buffer{}, Err: &stderr}
		cmd := NewCmdRun(s, nil, func(*runOptions) error { ran = true; return nil })
		code := Execute(cmd, s, []string{"--record", c.record, "--report", c.report, "--", "true"})
		if code != lineage.ExitFailure || ran {
			t.Errorf("--record %s --report %s: exit %d, ran %v; want exit %d before anything runs", c.record, c.report, code, ran, lineage.ExitFailure)
		}
		if msg := stderr.String(); !strings.Contains(msg, "--record "+c.record+" and --report "+c.report+" name the same file") || strings.Count(msg, "\n") != 1 {
			t.Errorf("--record %s --report %s: %q, want one line naming both", c.record, c.report, msg)
		}
	}
	if o, err := parseRun(t, "--record", "trace.jsonl", "--report", "report.json"); err != nil || o.record.File != "trace.jsonl" || o.ReportFile != "report.json" {
		t.Errorf("two files: %v", err)
	}
}

// A --report that can't be written says so, naming the flag, before the
// job runs.
func TestRunBadReportFileNamesTheFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing", "x.json")
	ran := false
	var stderr bytes.Buffer
	s := Streams{Out: &bytes.Buffer{}, Err: &stderr}
	standalone := func(context.Context, StandaloneJob) (*job.Report, job.End, error) {
		ran = true
		return nil, job.End{}, errors.New("ran")
	}
	code := Execute(NewCmdRun(s, standalone, nil), s, []string{"--standalone", "--report", missing, "--", "true"})
	if code != lineage.ExitFailure || ran {
		t.Errorf("exit %d, ran %v; want exit %d before anything runs", code, ran, lineage.ExitFailure)
	}
	if msg := stderr.String(); !strings.HasPrefix(msg, "lineage: --report: "+missing+": ") || !strings.Contains(msg, "no such file or directory") {
		t.Errorf("%q, want the flag named", msg)
	}
}
