package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/testutil"
)

// apiExample is one curl example of docs/api.md and the status it answers.
type apiExample struct {
	status string
	stream bool
	script string
}

var exampleRE = regexp.MustCompile("(?s)<!-- example: (\\d{3})( stream)? -->\\s*```sh\\n(.*?)```")

func apiExamples(t *testing.T) []apiExample {
	t.Helper()
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []apiExample
	for _, m := range exampleRE.FindAllStringSubmatch(string(doc), -1) {
		out = append(out, apiExample{status: m[1], stream: m[2] != "", script: strings.TrimSpace(m[3])})
	}
	if len(out) < 10 {
		t.Fatalf("%d examples in docs/api.md", len(out))
	}
	return out
}

// Every curl example of docs/api.md runs, in order, against a real daemon
// and answers the status the document gives it, so the document can't
// drift from the API.
func TestAPIDocExamplesRun(t *testing.T) {
	testutil.LookTool(t, "curl")
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	pid, start := ident(t, startSleep(t, exec.Command("sleep", testutil.Sleep(mark))))
	for i, ex := range apiExamples(t) {
		cmd := exec.Command("sh", "-c", ex.script+` -o /dev/null -w '%{http_code}'`)
		cmd.Env = append(os.Environ(), "SOCK="+d.sock, fmt.Sprintf("PID=%d", pid), fmt.Sprintf("START=%d", start))
		out, err := cmd.Output()
		if err != nil && !(ex.stream && cmd.ProcessState.ExitCode() == 28) {
			t.Errorf("example %d: %v\n%s", i, err, ex.script)
		}
		if got := strings.TrimSpace(string(out)); got != ex.status {
			t.Errorf("example %d answered %s, the document says %s:\n%s", i, got, ex.status, ex.script)
		}
	}
}
