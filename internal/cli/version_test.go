package cli

import (
	"bytes"
	"encoding/json"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/buildinfo"
)

func runVersion(t *testing.T, args ...string) string {
	t.Helper()
	var out, errOut bytes.Buffer
	s := Streams{In: strings.NewReader(""), Out: &out, Err: &errOut}
	root := NewRoot(s)
	root.AddCommand(NewCmdVersion(s))
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		t.Fatalf("lineage %s: %v\n%s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

func TestVersion(t *testing.T) {
	text := runVersion(t, "version")
	if flag := runVersion(t, "--version"); flag != text {
		t.Errorf("--version printed %q, version %q", flag, text)
	}
	var info buildinfo.Info
	if err := json.Unmarshal([]byte(runVersion(t, "version", "--json")), &info); err != nil {
		t.Fatal(err)
	}
	if info != buildinfo.Get() {
		t.Errorf("version --json = %+v, want %+v", info, buildinfo.Get())
	}
	// A binary with no BPF objects (the front; this test) reports the
	// committed objects' digest: every lineage binary has one.
	if !regexp.MustCompile(`^[0-9a-f]{12}$`).MatchString(info.BPF) {
		t.Errorf("bpf digest %q: want 12 hex digits", info.BPF)
	}
	if info.Arch != runtime.GOARCH {
		t.Errorf("version --json: arch %q, want %q", info.Arch, runtime.GOARCH)
	}
	want := "lineage " + info.Version + " ("
	if !strings.HasPrefix(text, want) || !strings.Contains(text, info.Go) || !strings.Contains(text, "arch "+runtime.GOARCH) || !strings.Contains(text, "bpf "+info.BPF) {
		t.Errorf("version printed %q: want %q... with %s, arch %s and bpf %s", text, want, info.Go, runtime.GOARCH, info.BPF)
	}
	if _, err := newRootCmdArgs("version", "extra"); err == nil {
		t.Error("version with an argument: no error")
	}
	// -v means verbose elsewhere; on its own it is no version flag.
	if out, err := newRootCmdArgs("-v"); err == nil {
		t.Errorf("lineage -v: no error (%q)", out)
	}
}

func newRootCmdArgs(args ...string) (string, error) {
	var out bytes.Buffer
	s := Streams{In: strings.NewReader(""), Out: &out, Err: &out}
	root := NewRoot(s)
	root.AddCommand(NewCmdVersion(s))
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}
