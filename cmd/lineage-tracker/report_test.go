package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/report"
	"github.com/lineage-dev/lineage/lineage"
)

func TestNewCmdReport(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    reportOptions
		wantErr string
	}{
		{name: "default", args: []string{"t.jsonl"}, want: reportOptions{File: "t.jsonl", Format: "tree", Depth: -1}},
		{name: "leaks only, depth", args: []string{"t.jsonl", "--leaks-only", "--depth", "2"}, want: reportOptions{File: "t.jsonl", Format: "tree", LeaksOnly: true, Depth: 2}},
		{name: "depth 0", args: []string{"t.jsonl", "--depth=0"}, want: reportOptions{File: "t.jsonl", Format: "tree", Depth: 0}},
		{name: "bad depth", args: []string{"t.jsonl", "--depth", "-2"}, wantErr: "invalid --depth -2"},
		{name: "leaks only for json", args: []string{"t.jsonl", "-f", "json", "--leaks-only"}, wantErr: "tree only, not to --format json"},
		{name: "depth for html", args: []string{"t.jsonl", "-f", "html", "--depth", "1"}, wantErr: "tree only, not to --format html"},
		{name: "html to a file", args: []string{"t.jsonl", "--format", "html", "-o", "r.html"}, want: reportOptions{File: "t.jsonl", Format: "html", Output: "r.html", Depth: -1}},
		{name: "trace", args: []string{"-f", "chrome-trace", "t.jsonl"}, want: reportOptions{File: "t.jsonl", Format: "chrome-trace", Depth: -1}},
		{name: "bad format", args: []string{"t.jsonl", "--format", "svg"}, wantErr: `invalid --format "svg"`},
		{name: "output is the record", args: []string{"t.jsonl", "-o", "./t.jsonl"}, wantErr: "invalid --output ./t.jsonl: the same file as the record t.jsonl"},
		{name: "no file", args: nil, wantErr: "accepts 1 arg"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			var got *reportOptions
			cmd := newCmdReport(cli.Streams{Out: &stdout, Err: &stderr}, func(o *reportOptions) error {
				got = o
				return nil
			})
			cmd.SetArgs(tc.args)
			err := cmd.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || got != nil {
					t.Fatalf("error %v, want %q, runF called: %v", err, tc.wantErr, got != nil)
				}
				return
			}
			if err != nil || got == nil {
				t.Fatalf("error %v, runF called: %v", err, got != nil)
			}
			if got.File != tc.want.File || got.Format != tc.want.Format || got.Output != tc.want.Output || got.LeaksOnly != tc.want.LeaksOnly || got.Depth != tc.want.Depth || got.out != &stdout {
				t.Errorf("options %+v, want %+v", got, tc.want)
			}
		})
	}
}

// writeRecord writes a small record: a root that forked a daemon, which
// leaked.
func writeRecord(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "trace.jsonl")
	w, err := record.Create(path, record.Header{Host: "h"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	root := lineage.Identity{PID: 10, StartTicks: 1}
	daemon := lineage.Identity{PID: 11, StartTicks: 2}
	for _, ev := range []lineage.Event{
		{Kind: lineage.EventFork, Time: time.Second, Process: root, Root: root, IsRoot: true},
		{Kind: lineage.EventExec, Time: time.Second, Process: root, Root: root, Argv: []string{"sh", "-c", "job"}},
		{Kind: lineage.EventFork, Time: 2 * time.Second, Process: daemon, Parent: root, Root: root},
		{Kind: lineage.EventExec, Time: 2 * time.Second, Process: daemon, Parent: root, Root: root, Argv: []string{"daemon", "\x1b[31m"}},
		{Kind: lineage.EventExit, Time: 3 * time.Second, Process: root, Root: root},
	} {
		if err := w.Event(ev); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Leak(lineage.Member{Identity: daemon, Parent: root, Root: root}, "root exited"); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func runReport(t *testing.T, opts *reportOptions) (string, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	opts.out, opts.err = &stdout, &stderr
	if opts.color == nil {
		opts.color = wantsColor
	}
	err := reportRun(opts)
	return stdout.String(), stderr.String(), err
}

func TestReportRunFormats(t *testing.T) {
	path := writeRecord(t)
	for _, format := range reportFormats {
		t.Run(format, func(t *testing.T) {
			out, _, err := runReport(t, &reportOptions{File: path, Format: format, Depth: -1})
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "\x1b") {
				t.Error("escape sequence in the output: colour or argv")
			}
			switch format {
			case "tree":
				if !strings.Contains(out, `LEAK daemon $'\x1b[31m'`) {
					t.Errorf("tree:\n%s", out)
				}
			case "html":
				if !strings.HasPrefix(out, "<!DOCTYPE html>") {
					t.Errorf("html starts %q", out[:40])
				}
			default:
				if !json.Valid([]byte(out)) {
					t.Errorf("%s is not JSON", format)
				}
			}
		})
	}
}

// --leaks-only draws the path to the leaked daemon; --depth 0 the root
// alone, the rest summarised.
func TestReportTreeShapes(t *testing.T) {
	path := writeRecord(t)
	out, _, err := runReport(t, &reportOptions{File: path, Format: "tree", LeaksOnly: true, Depth: -1})
	if err != nil || !strings.Contains(out, "sh -c job  pid 10 ") || !strings.Contains(out, "└─ LEAK daemon") || !strings.Contains(out, "(leaks only: 2 of 2 processes drawn") {
		t.Errorf("leaks only: %v\n%s", err, out)
	}
	out, _, err = runReport(t, &reportOptions{File: path, Format: "tree", Depth: 0})
	if err != nil || !strings.Contains(out, "└─ … 1 more process, 1 leak among them") || strings.Contains(out, "─ LEAK daemon") {
		t.Errorf("depth 0: %v\n%s", err, out)
	}
}

func TestReportColour(t *testing.T) {
	path := writeRecord(t)
	out, _, err := runReport(t, &reportOptions{File: path, Format: "tree", Depth: -1, color: func(io.Writer) bool { return true }})
	if err != nil || !strings.Contains(out, "\x1b[1;31mLEAK\x1b[0m") {
		t.Errorf("error %v, tree:\n%q", err, out)
	}
	t.Setenv("NO_COLOR", "1")
	if wantsColor(os.Stdout) {
		t.Error("NO_COLOR is not honoured")
	}
}

func TestReportOutputFile(t *testing.T) {
	path := writeRecord(t)
	dest := filepath.Join(t.TempDir(), "report.html")
	out, _, err := runReport(t, &reportOptions{File: path, Format: "html", Depth: -1, Output: dest})
	if err != nil || out != "" {
		t.Fatalf("error %v, stdout %q", err, out)
	}
	st, err := os.Stat(dest)
	if err != nil || st.Size() == 0 || st.Mode().Perm() != 0o600 {
		t.Errorf("report file: %v %v", st, err)
	}
}

// --output refuses the record itself, however named, and a symbolic link
// (as `lineage run --record` does), writing nothing.
func TestReportOutputRefusals(t *testing.T) {
	path := writeRecord(t)
	dir := filepath.Dir(path)
	rec, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "tl.jsonl")
	hard := filepath.Join(dir, "hard.jsonl")
	target := filepath.Join(dir, "target.html")
	page := filepath.Join(dir, "link.html")
	for _, err := range []error{
		os.Symlink("trace.jsonl", link),
		os.Link(path, hard),
		os.WriteFile(target, []byte("keep"), 0o644),
		os.Symlink("target.html", page),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{path, "-o", path}, "the same file as the record " + path},
		{[]string{link, "-o", path}, "the same file as the record " + link},
		{[]string{path, "-o", link}, "the same file as the record " + path},
		{[]string{hard, "-o", path}, "the same file as the record " + hard},
		{[]string{path, "--format", "html", "-o", page}, "a symbolic link: refused"},
	} {
		var stdout, stderr bytes.Buffer
		s := cli.Streams{Out: &stdout, Err: &stderr}
		code := cli.Execute(newRootCmd(s), s, append([]string{"report"}, c.args...))
		if code != lineage.ExitFailure || !strings.Contains(stderr.String(), c.want) || strings.Count(stderr.String(), "\n") != 1 || stdout.Len() != 0 {
			t.Errorf("report %q: exit %d, stderr %q, stdout %d bytes; want exit %d saying %q", c.args, code, stderr.String(), stdout.Len(), lineage.ExitFailure, c.want)
		}
	}
	if got, _ := os.ReadFile(path); !bytes.Equal(got, rec) {
		t.Errorf("the record was written over:\n%s", got)
	}
	if got, _ := os.ReadFile(target); string(got) != "keep" {
		t.Errorf("the link's target was written over: %q", got)
	}
	if fi, err := os.Lstat(page); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the link at --output was replaced: %v %v", fi, err)
	}
}

func TestReportBadInput(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.jsonl")
	damaged := filepath.Join(dir, "damaged.jsonl")
	huge := filepath.Join(dir, "huge.jsonl")
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile(empty, nil, 0o600))
	good, err := os.ReadFile(writeRecord(t))
	must(err)
	must(os.WriteFile(damaged, append(append([]byte{}, good...), `{"kind":"exit","proc`...), 0o600))
	must(os.WriteFile(huge, good, 0o600))
	must(os.Truncate(huge, report.MaxHTMLRecord+1))

	if _, _, err := runReport(t, &reportOptions{File: empty, Format: "tree", Depth: -1}); !errors.Is(err, lineage.ErrInvalid) || !strings.Contains(err.Error(), "empty") {
		t.Errorf("empty: %v", err)
	}
	if _, _, err := runReport(t, &reportOptions{File: filepath.Join(dir, "missing"), Format: "tree"}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing: %v", err)
	}
	out, stderr, err := runReport(t, &reportOptions{File: damaged, Format: "json", Depth: -1})
	if err != nil || !json.Valid([]byte(out)) || !strings.Contains(stderr, ": 1 problem, the first: line 8: cut short") || !strings.Contains(stderr, "(the report lists it)") {
		t.Errorf("damaged: error %v, stderr %q", err, stderr)
	}
	if _, _, err := runReport(t, &reportOptions{File: huge, Format: "html", Depth: -1}); !errors.Is(err, report.ErrTooLarge) || !strings.Contains(err.Error(), "chrome-trace") {
		t.Errorf("huge: %v", err)
	}
}
