package job

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/buildinfo"
)

func TestReportNamesTheBuild(t *testing.T) {
	r := goldenReports()["leftovers"]()
	b := buildinfo.Info{Version: "v9.9.9-1-gabc", Commit: "abcdef012345", Go: "go1.99", BPF: "0123456789ab"}
	r.Build = &b
	var quiet, verbose bytes.Buffer
	r.WriteText(&quiet, TextOptions{})
	r.WriteText(&verbose, TextOptions{Verbose: true})
	want := "lineage: version v9.9.9-1-gabc (commit abcdef012345, go1.99, bpf 0123456789ab)\n"
	if !strings.Contains(verbose.String(), want) {
		t.Errorf("-v report lacks %q:\n%s", want, verbose.String())
	}
	if strings.Contains(quiet.String(), "v9.9.9") {
		t.Errorf("report without -v names the build:\n%s", quiet.String())
	}
	raw, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct{ Build buildinfo.Info }
	if err := json.Unmarshal(raw, &back); err != nil || back.Build != b {
		t.Errorf("JSON build = %+v (%v), want %+v", back.Build, err, b)
	}
}
