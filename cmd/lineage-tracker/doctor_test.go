package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/internal/doctor"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

func TestNewCmdDoctor(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		want    doctorOptions
		wantErr string
	}{
		{name: "table", args: nil, want: doctorOptions{}},
		{name: "json", args: []string{"--json"}, want: doctorOptions{JSON: true}},
		{name: "no arguments", args: []string{"extra"}, wantErr: `unknown command "extra"`},
		{name: "unknown flag", args: []string{"--yaml"}, wantErr: "unknown flag: --yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			var got *doctorOptions
			cmd := newCmdDoctor(cli.Streams{Out: &stdout, Err: &stderr}, func(o *doctorOptions) error {
				got = o
				return nil
			})
			cmd.SetArgs(tc.args)
			cmd.SetOut(&stdout)
			cmd.SetErr(&stderr)
			err := cmd.Execute()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				if got != nil {
					t.Error("runF was called")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got == nil {
				t.Fatal("runF was not called")
			}
			if got.JSON != tc.want.JSON {
				t.Errorf("JSON = %v, want %v", got.JSON, tc.want.JSON)
			}
			if got.out != &stdout {
				t.Error("output does not go to the command's stdout")
			}
			if got.system.OpenBPF == nil || got.system.Host == nil || got.system.Features == nil || got.system.Root != "/" {
				t.Error("the system examined is not this machine")
			}
		})
	}
}

func TestDoctorHelpDocumentsExitStatus(t *testing.T) {
	var stdout bytes.Buffer
	cmd := newCmdDoctor(cli.Streams{Out: &stdout, Err: &stdout}, nil)
	cmd.SetArgs([]string{"--help"})
	if err := cmd.Execute(); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"Exit status:", "0    the bpf backend is available", "1    it is not", "--json"} {
		if !strings.Contains(stdout.String(), w) {
			t.Errorf("help lacks %q:\n%s", w, stdout.String())
		}
	}
}

// fakeSystem is a machine whose pre-checks find no BTF (an empty file tree
// for the rest) but whose syscalls succeed, and whose BPF load gives loadErr.
func fakeSystem(t *testing.T, loadErr error) doctor.System {
	return doctor.System{
		Root: t.TempDir(),
		Host: func() loader.Host {
			return loader.Host{Release: "6.18.0", BTF: os.ErrNotExist, Caps: 1<<41 - 1, PIDNamespace: "pid:[4026531836]"}
		},
		Features:  func() (loader.Features, error) { return loader.Features{}, nil },
		PidfdOpen: func() error { return nil },
		Subreaper: func() error { return nil },
		OpenBPF: func() (loader.Loaded, error) {
			if loadErr != nil {
				return loader.Loaded{}, loadErr
			}
			return loader.Loaded{Variant: loader.VariantFull, Containment: lineage.ContainKernel, HardCancel: loader.HardCancelKernel}, nil
		},
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestDoctorRun(t *testing.T) {
	refused := errors.New("the kernel said no")
	for _, tc := range []struct {
		name     string
		loadErr  error
		json     bool
		wantCode int // 0: no error
		want     string
	}{
		{name: "bpf available", want: "\nbackend: bpf available\n"},
		{name: "proc fallback", loadErr: refused, wantCode: 1,
			want: "\nbackend: proc fallback, because the kernel has no BTF"},
		{name: "json available", json: true, want: `"verdict": "backend: bpf available"`},
		{name: "json fallback", loadErr: refused, json: true, wantCode: 1, want: `"bpf_available": false`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := doctorRun(&doctorOptions{out: &out, system: fakeSystem(t, tc.loadErr), JSON: tc.json})
			code := 0
			var ee cli.ExitError
			if errors.As(err, &ee) {
				code = ee.Code
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.wantCode {
				t.Errorf("exit status %d, want %d", code, tc.wantCode)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("output lacks %q:\n%s", tc.want, out.String())
			}
			if tc.json && !json.Valid(out.Bytes()) {
				t.Errorf("not JSON:\n%s", out.String())
			}
		})
	}
	t.Run("write fails", func(t *testing.T) {
		err := doctorRun(&doctorOptions{out: failingWriter{}, system: fakeSystem(t, nil)})
		var ee cli.ExitError
		if err == nil || errors.As(err, &ee) || !strings.Contains(err.Error(), "disk full") {
			t.Errorf("error %v, want the write's", err)
		}
	})
}

// TestDoctorOnThisMachine runs `lineage doctor` for real. Where the BPF
// tracker loads, it must say so and exit 0; where it can't, the test skips
// (fails with LINEAGE_REQUIRE_BPF=1).
func TestDoctorOnThisMachine(t *testing.T) {
	run := func(args ...string) (string, int) {
		var stdout, stderr bytes.Buffer
		root := newRootCmd(cli.Streams{In: strings.NewReader(""), Out: &stdout, Err: &stderr})
		root.SetArgs(append([]string{"doctor"}, args...))
		err := root.Execute()
		var ee cli.ExitError
		switch {
		case err == nil:
			return stdout.String(), 0
		case errors.As(err, &ee):
			return stdout.String(), ee.Code
		}
		t.Fatalf("doctor failed: %v\n%s", err, stderr.String())
		return "", 0
	}

	out, code := run("--json")
	var rep doctor.Report
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("not a report: %v\n%s", err, out)
	}
	if load, ok := rep.Check(doctor.CheckBPFLoad); !ok || load.Status != doctor.OK {
		testutil.SkipWithoutBPF(t, errors.New(load.Detail))
	}
	if code != 0 || !rep.BPFAvailable || rep.Verdict != "backend: bpf available" {
		t.Errorf("the tracker loads here, but doctor --json exits %d with %q", code, rep.Verdict)
	}

	out, code = run()
	if code != 0 || !strings.HasSuffix(out, "\nbackend: bpf available\n") {
		t.Errorf("doctor exits %d:\n%s", code, out)
	}
	t.Logf("\n%s", out)
}
