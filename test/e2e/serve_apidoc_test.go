package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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
// and answers the status the document gives it, and every field of its
// JSON answers is named in the document, so the document can't drift from
// the API.
func TestAPIDocExamplesRun(t *testing.T) {
	testutil.LookTool(t, "curl")
	d := startDaemon(t, "")
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	pid, start := ident(t, startSleep(t, exec.Command("sleep", testutil.Sleep(mark))))
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	body := filepath.Join(t.TempDir(), "body")
	fields := map[string]bool{}
	for i, ex := range apiExamples(t) {
		cmd := exec.Command("sh", "-c", ex.script+` -o "$BODY" -w '%{http_code}'`)
		cmd.Env = append(os.Environ(), "SOCK="+d.sock, fmt.Sprintf("PID=%d", pid), fmt.Sprintf("START=%d", start), "BODY="+body)
		out, err := cmd.Output()
		if err != nil && !(ex.stream && cmd.ProcessState.ExitCode() == 28) {
			t.Errorf("example %d: %v\n%s", i, err, ex.script)
		}
		if got := strings.TrimSpace(string(out)); got != ex.status {
			t.Errorf("example %d answered %s, the document says %s:\n%s", i, got, ex.status, ex.script)
		}
		if answer, err := os.ReadFile(body); err == nil && !ex.stream {
			var v any
			if json.Unmarshal(answer, &v) == nil {
				jsonFields(v, fields)
			}
		}
	}
	if len(fields) < 20 {
		t.Fatalf("the examples' answers hold %d fields: the check is blind", len(fields))
	}
	for f := range fields {
		if !bytes.Contains(doc, []byte("`"+f+"`")) && !bytes.Contains(doc, []byte(`"`+f+`"`)) {
			t.Errorf("the daemon answers with a field %q that docs/api.md doesn't name", f)
		}
	}
}

// jsonFields adds the names of every object's fields in v to fields.
func jsonFields(v any, fields map[string]bool) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			fields[k] = true
			jsonFields(e, fields)
		}
	case []any:
		for _, e := range v {
			jsonFields(e, fields)
		}
	}
}

// headingRE is an endpoint heading of docs/api.md: "### GET /v1/x, POST /v1/y".
var headingRE = regexp.MustCompile(`(?m)^### (.+)$`)

// documentedMethods reads the endpoint headings of docs/api.md: for each
// path (its {placeholders} filled in, its query dropped), the methods the
// document gives it.
func documentedMethods(t *testing.T) map[string][]string {
	t.Helper()
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	fill := strings.NewReplacer("{id}", "x", "{PID@START}", "5@5", "{rule}", "5@5", "{PID or PID@START}", "5")
	out := map[string][]string{}
	for _, m := range headingRE.FindAllStringSubmatch(string(doc), -1) {
		for _, ep := range strings.Split(m[1], ", ") {
			method, path, ok := strings.Cut(ep, " ")
			if !ok || !strings.HasPrefix(path, "/") {
				continue
			}
			path, _, _ = strings.Cut(fill.Replace(path), "?")
			out[path] = append(out[path], method)
		}
	}
	if len(out) < 10 {
		t.Fatalf("%d documented paths in docs/api.md", len(out))
	}
	return out
}

// Every documented path takes exactly the methods the document gives it:
// the daemon's 405 answer lists those it takes, so a method added, moved
// or dropped in the code and not in the document fails here.
func TestAPIDocMethodsMatchTheDaemon(t *testing.T) {
	d := startDaemon(t, "")
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", d.sock)
	}}}
	defer hc.CloseIdleConnections()
	for path, want := range documentedMethods(t) {
		req, err := http.NewRequest("PATCH", "http://x"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		var got []string
		for _, v := range resp.Header.Values("Allow") {
			for _, m := range strings.Split(v, ",") {
				if m = strings.TrimSpace(m); m != "HEAD" {
					got = append(got, m)
				}
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if resp.StatusCode != http.StatusMethodNotAllowed || !slices.Equal(got, slices.Compact(want)) {
			t.Errorf("PATCH %s: %d, Allow %q; the document gives %q", path, resp.StatusCode, got, want)
		}
	}
}
