package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/testutil"
)

// The answers docs/api.md shows, and how a live one is held to them.
//
// Under each example (`<!-- example: STATUS -->` or `<!-- example: STATUS
// stream -->` before a ```sh block) the page shows the answer one run of
// the examples gave, in the block right after it: ```json for JSON (an
// NDJSON stream's lines for a stream), ```text for /metrics. The values
// (pids, start times, times, paths, counts) are that run's and are never
// compared; the shape is, and any difference fails, naming the example,
// the JSON path and what differs:
//
//   - JSON: the same JSON type (object, array, string, number, boolean,
//     null) at every path, and every object the same keys: a key the page
//     shows and the daemon didn't send, or the daemon sent and the page
//     doesn't show, fails. A field the daemon may or may not send in this
//     run (a value that depends on timing) is marked in the example's
//     marker, `<!-- example: 200; optional: $.chain[].ppid -->`, by its
//     path with the indices left out; only then may it be missing on
//     either side.
//   - Arrays: an empty array matches only an empty one (the page says
//     there is nothing there, or shows what an element looks like). Else
//     the elements are compared by index, all of them, each past the end
//     of the shorter array with that array's last: the lengths are values
//     (how many sessions, how many argv words), but every element is held
//     to a shown one, and a list whose elements differ by position (a why
//     chain's root step alone has is_root) is held element by element.
//   - Streams: the header (line 1) with the header; every other line with
//     the lines shown of its kind (it must match one of them), in any
//     order (lines are in the order written, not in time order: record.md).
//     Every kind shown must come, and a kind not shown fails, except
//     `loss`, which a loaded machine may add to any stream (held to a
//     shown one only if the page shows one).
//   - Text (/metrics, an excerpt): every `# TYPE` line shown is in the
//     answer as shown, and every sample shown names a series the answer
//     has, by name and label names (values and label values aside).
//
// The examples run in order against one fresh daemon, so the fields a
// run gives are the same every run; a stream example runs in the
// background from where it stands until it ends (a session's, when the
// session closes), the examples after it going on meanwhile.

// apiExample is one curl example of docs/api.md, the status it answers,
// and the answer shown under it.
type apiExample struct {
	// line is the line of its marker in docs/api.md.
	line   int
	status string
	stream bool
	// optional are the paths, indices left out, that may be missing on
	// either side.
	optional map[string]bool
	script   string
	// shownKind is the shown answer's block, "json" or "text"; "" when
	// the page shows none.
	shownKind string
	shown     string
}

// name names the example in a failure: where it is, and its command.
func (ex apiExample) name() string {
	first, _, _ := strings.Cut(ex.script, "\n")
	return fmt.Sprintf("the example at docs/api.md:%d (%s)", ex.line, strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(first), `\`)))
}

var exampleRE = regexp.MustCompile("(?s)<!-- example: (\\d{3})( stream)?(?:; optional: ([^>]*?))? -->\\s*```sh\\n(.*?)```(?:[ \\t]*\\n\\s*```(json|text)\\n(.*?)```)?")

// answerBlockRE is an answer shown on the page.
var answerBlockRE = regexp.MustCompile("(?s)```(?:json|text)\\n.*?```")

func apiExamples(t *testing.T) []apiExample {
	t.Helper()
	doc, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	out := parseExamples(doc)
	if len(out) < 10 {
		t.Fatalf("%d examples in docs/api.md", len(out))
	}
	return out
}

// parseExamples reads the examples of a page in docs/api.md's form.
func parseExamples(doc []byte) []apiExample {
	var out []apiExample
	for _, m := range exampleRE.FindAllStringSubmatchIndex(string(doc), -1) {
		group := func(i int) string {
			if m[2*i] < 0 {
				return ""
			}
			return string(doc[m[2*i]:m[2*i+1]])
		}
		ex := apiExample{
			line:      1 + bytes.Count(doc[:m[0]], []byte("\n")),
			status:    group(1),
			stream:    group(2) != "",
			optional:  map[string]bool{},
			script:    strings.TrimSpace(group(4)),
			shownKind: group(5),
			shown:     group(6),
		}
		for _, p := range strings.Split(group(3), ",") {
			if p = strings.TrimSpace(p); p != "" {
				ex.optional[p] = true
			}
		}
		out = append(out, ex)
	}
	return out
}

// Every curl example of docs/api.md runs, in order, against a real daemon
// and answers the status the document gives it, in the shape of the
// answer shown under it (the rules are at the top of this file), and every
// field of its JSON answers is named in the document's prose, so the
// document can't drift from the API.
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
	dir := t.TempDir()
	fields := map[string]bool{}
	check := func(ex apiExample, status string, body string) {
		t.Helper()
		if status != ex.status {
			t.Errorf("%s answered %s, the document says %s:\n%s", ex.name(), status, ex.status, body)
		}
		for _, diff := range answerDiffs(ex, body) {
			t.Errorf("%s: %s", ex.name(), diff)
		}
		var v any
		if !ex.stream && json.Unmarshal([]byte(body), &v) == nil {
			jsonFields(v, fields)
		}
	}
	type running struct {
		ex   apiExample
		cmd  *exec.Cmd
		out  *bytes.Buffer
		body string
	}
	var streams []running
	for i, ex := range apiExamples(t) {
		if ex.shownKind == "" {
			t.Errorf("%s shows no answer: a ```json or ```text block must follow it", ex.name())
		}
		body := filepath.Join(dir, fmt.Sprintf("body%d", i))
		script := ex.script + ` -o "$BODY" -w '%{http_code}'`
		if ex.stream {
			// A stream the page says ends must end: past this, curl
			// gives up with exit 28.
			script += " --max-time 120"
		}
		cmd := exec.Command("sh", "-c", script)
		cmd.Env = append(os.Environ(), "SOCK="+d.sock, fmt.Sprintf("PID=%d", pid), fmt.Sprintf("START=%d", start), "BODY="+body)
		if ex.stream {
			out := &bytes.Buffer{}
			cmd.Stdout = out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if cmd.ProcessState == nil {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
			})
			// The header is written once the stream is subscribed: from
			// then on it sees what the next examples do.
			testutil.Eventually(t, 30*time.Second, ex.name()+"'s header", func() bool {
				fi, err := os.Stat(body)
				return err == nil && fi.Size() > 0
			})
			streams = append(streams, running{ex, cmd, out, body})
			continue
		}
		out, err := cmd.Output()
		if err != nil {
			t.Errorf("%s: %v", ex.name(), err)
		}
		answer, _ := os.ReadFile(body)
		check(ex, strings.TrimSpace(string(out)), string(answer))
	}
	for _, s := range streams {
		if err := s.cmd.Wait(); err != nil {
			t.Errorf("%s: %v (exit 28: the stream did not end)", s.ex.name(), err)
		}
		answer, _ := os.ReadFile(s.body)
		check(s.ex, strings.TrimSpace(s.out.String()), string(answer))
	}
	if len(fields) < 20 {
		t.Fatalf("the examples' answers hold %d fields: the check is blind", len(fields))
	}
	// The answers shown name every field; the prose must too.
	prose := answerBlockRE.ReplaceAll(doc, nil)
	for f := range fields {
		if !bytes.Contains(prose, []byte("`"+f+"`")) && !bytes.Contains(prose, []byte(`"`+f+`"`)) {
			t.Errorf("the daemon answers with a field %q that docs/api.md doesn't name", f)
		}
	}
}

// answerDiffs returns how the live answer's shape differs from the one
// the example shows, each difference a sentence; none when they agree.
func answerDiffs(ex apiExample, live string) []string {
	var diffs []string
	switch {
	case ex.shownKind == "":
		return nil
	case ex.stream:
		diffs = streamDiffs(ex.shown, live, ex.optional)
	case ex.shownKind == "text":
		diffs = textDiffs(ex.shown, live)
	default:
		var shown, got any
		if err := json.Unmarshal([]byte(ex.shown), &shown); err != nil {
			return []string{fmt.Sprintf("the answer shown is not JSON: %v", err)}
		}
		if err := json.Unmarshal([]byte(live), &got); err != nil {
			return []string{fmt.Sprintf("the daemon's answer is not JSON: %v:\n%s", err, live)}
		}
		diffs = shapeDiffs(shown, got, "$", ex.optional)
	}
	if len(diffs) > 0 && ex.shownKind == "json" {
		diffs[len(diffs)-1] += "\nthe daemon's answer:\n" + live
	}
	return diffs
}

// jsonType names v's JSON type.
func jsonType(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return fmt.Sprintf("%T", v)
}

// indexRE is an array index in a path, left out in optional paths.
var indexRE = regexp.MustCompile(`\[\d+\]`)

// shapeDiffs returns where live's shape differs from shown's, each as
// "PATH: what", below path ($ for the whole answer).
func shapeDiffs(shown, live any, path string, optional map[string]bool) []string {
	if ts, tl := jsonType(shown), jsonType(live); ts != tl {
		return []string{fmt.Sprintf("%s: the page shows a JSON %s, the daemon answered a JSON %s", path, ts, tl)}
	}
	var diffs []string
	switch s := shown.(type) {
	case map[string]any:
		l := live.(map[string]any)
		keys := slices.Sorted(maps.Keys(s))
		for k := range l {
			if _, ok := s[k]; !ok {
				keys = append(keys, k)
			}
		}
		for _, k := range keys {
			p := path + "." + k
			sv, inShown := s[k]
			lv, inLive := l[k]
			switch {
			case inShown && inLive:
				diffs = append(diffs, shapeDiffs(sv, lv, p, optional)...)
			case optional[indexRE.ReplaceAllString(p, "[]")]:
			case inShown:
				diffs = append(diffs, fmt.Sprintf("%s: the page shows it, the daemon's answer has no such field", p))
			default:
				diffs = append(diffs, fmt.Sprintf("%s: the daemon answered it (a JSON %s), the page doesn't show it", p, jsonType(lv)))
			}
		}
	case []any:
		l := live.([]any)
		switch {
		case len(s) == 0 && len(l) == 0:
		case len(s) == 0:
			diffs = append(diffs, fmt.Sprintf("%s: the page shows an empty array, the daemon answered an array of %d", path, len(l)))
		case len(l) == 0:
			diffs = append(diffs, fmt.Sprintf("%s: the page shows an array of %d, the daemon answered an empty array", path, len(s)))
		default:
			for i := range max(len(s), len(l)) {
				diffs = append(diffs, shapeDiffs(s[min(i, len(s)-1)], l[min(i, len(l)-1)], fmt.Sprintf("%s[%d]", path, i), optional)...)
			}
		}
	}
	return diffs
}

// ndjson reads a stream's lines, each a JSON object.
func ndjson(text string) ([]map[string]any, error) {
	var out []map[string]any
	for i, line := range strings.Split(strings.TrimSpace(text), "\n") {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// streamDiffs returns where a live NDJSON stream's shape differs from the
// lines shown: the header with the header, each event with the shown
// events of its kind.
func streamDiffs(shown, live string, optional map[string]bool) []string {
	s, err := ndjson(shown)
	if err != nil {
		return []string{fmt.Sprintf("the stream shown: %v", err)}
	}
	l, err := ndjson(live)
	if err != nil {
		return []string{fmt.Sprintf("the daemon's stream: %v", err)}
	}
	if len(l) == 0 {
		return []string{"the daemon's stream is empty"}
	}
	var diffs []string
	for _, d := range shapeDiffs(s[0], l[0], "$", optional) {
		diffs = append(diffs, "line 1 (the header): "+d)
	}
	byKind := map[string][]map[string]any{}
	for _, ev := range s[1:] {
		k, _ := ev["kind"].(string)
		byKind[k] = append(byKind[k], ev)
	}
	came := map[string]bool{}
	for i, ev := range l[1:] {
		k, _ := ev["kind"].(string)
		came[k] = true
		cands := byKind[k]
		if len(cands) == 0 {
			if k != "loss" {
				diffs = append(diffs, fmt.Sprintf("line %d: a %q event, of a kind the page doesn't show", i+2, k))
			}
			continue
		}
		var first []string
		for j, c := range cands {
			d := shapeDiffs(c, ev, "$", optional)
			if len(d) == 0 {
				first = nil
				break
			}
			if j == 0 {
				first = d
			}
		}
		for _, d := range first {
			diffs = append(diffs, fmt.Sprintf("line %d (%s): %s", i+2, k, d))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(byKind)) {
		if !came[k] {
			diffs = append(diffs, fmt.Sprintf("the page shows a %q event, the daemon's stream had none", k))
		}
	}
	return diffs
}

// labelRE is one label of a metric sample.
var labelRE = regexp.MustCompile(`([A-Za-z_][A-Za-z0-9_]*)="(?:[^"\\]|\\.)*"`)

// seriesKey is a line of the exposition format as its shape: a `# TYPE`
// line as it is, a sample as its name and label names; "" for the rest.
func seriesKey(line string) string {
	line = strings.TrimSpace(line)
	switch {
	case strings.HasPrefix(line, "# TYPE "):
		return line
	case line == "" || strings.HasPrefix(line, "#"):
		return ""
	}
	brace, space := strings.IndexByte(line, '{'), strings.IndexByte(line, ' ')
	if brace < 0 || (space >= 0 && space < brace) {
		name, _, _ := strings.Cut(line, " ")
		return name
	}
	name, labels := line[:brace], line[brace:]
	var names []string
	for _, m := range labelRE.FindAllStringSubmatch(labels, -1) {
		names = append(names, m[1])
	}
	slices.Sort(names)
	return name + "{" + strings.Join(names, ",") + "}"
}

// textDiffs returns the lines of a shown exposition-format excerpt whose
// series the live answer lacks.
func textDiffs(shown, live string) []string {
	have := map[string]bool{}
	for _, line := range strings.Split(live, "\n") {
		have[seriesKey(line)] = true
	}
	var diffs []string
	n := 0
	for i, line := range strings.Split(strings.TrimSpace(shown), "\n") {
		k := seriesKey(line)
		if k == "" {
			continue
		}
		n++
		if !have[k] {
			diffs = append(diffs, fmt.Sprintf("line %d of the answer shown, %q: the daemon's answer has no %s", i+1, line, k))
		}
	}
	if n == 0 {
		return []string{"the answer shown names no series"}
	}
	return diffs
}

// The shape rules hold a live answer to the one shown, and fail, naming
// the path, on every kind of difference they are meant to catch.
func TestAPIDocShapeRules(t *testing.T) {
	shown := `{"root": {"pid": 15832, "start": 1128558}, "label": "dev server", "members": [{"process": {"pid": 1, "start": 2}, "is_root": true}, {"process": {"pid": 3, "start": 4}}], "keeps": []}`
	for _, c := range []struct {
		name, live string
		optional   string
		want       []string
	}{
		{"other values, a longer array", `{"root": {"pid": 7, "start": 8}, "label": "x", "members": [{"process": {"pid": 5, "start": 6}, "is_root": false}, {"process": {"pid": 9, "start": 9}}, {"process": {"pid": 1, "start": 1}}], "keeps": []}`, "", nil},
		{"a renamed field", `{"root": {"pid": 7, "begin": 8}, "label": "x", "members": [{"process": {"pid": 5, "start": 6}, "is_root": true}, {"process": {"pid": 9, "start": 9}}], "keeps": []}`, "", []string{"$.root.start: the page shows it", "$.root.begin: the daemon answered it"}},
		{"another type", `{"root": {"pid": "7", "start": 8}, "label": null, "members": [{"process": {"pid": 5, "start": 6}, "is_root": true}, {"process": {"pid": 9, "start": 9}}], "keeps": []}`, "", []string{"$.label: the page shows a JSON string, the daemon answered a JSON null", "$.root.pid: the page shows a JSON number, the daemon answered a JSON string"}},
		{"an element's field by position", `{"root": {"pid": 7, "start": 8}, "label": "x", "members": [{"process": {"pid": 5, "start": 6}}, {"process": {"pid": 9, "start": 9}, "is_root": true}], "keeps": []}`, "", []string{"$.members[0].is_root: the page shows it", "$.members[1].is_root: the daemon answered it"}},
		{"an optional field, either way", `{"root": {"pid": 7, "start": 8}, "label": "x", "members": [{"process": {"pid": 5, "start": 6}}, {"process": {"pid": 9, "start": 9}, "is_root": true}], "keeps": []}`, "$.members[].is_root", nil},
		{"an optional field missing at the top", `{"root": {"pid": 7, "start": 8}, "members": [{"process": {"pid": 5, "start": 6}, "is_root": true}, {"process": {"pid": 9, "start": 9}}], "keeps": []}`, "$.label", nil},
		{"empty and not", `{"root": {"pid": 7, "start": 8}, "label": "x", "members": [], "keeps": [{"rule": "1@2"}]}`, "", []string{"$.keeps: the page shows an empty array, the daemon answered an array of 1", "$.members: the page shows an array of 2, the daemon answered an empty array"}},
	} {
		ex := apiExample{shownKind: "json", shown: shown, optional: map[string]bool{c.optional: c.optional != ""}}
		got := answerDiffs(ex, c.live)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d differences, want %d: %q", c.name, len(got), len(c.want), got)
			continue
		}
		for i, w := range c.want {
			if !strings.HasPrefix(got[i], w) {
				t.Errorf("%s: difference %d is %q, want it to begin %q", c.name, i, got[i], w)
			}
		}
	}

	page := []byte("<!-- example: 201 -->\n```sh\ncurl -X POST \\\n  x\n```\n\n```json\n{\"a\": 1}\n```\n\n" +
		"<!-- example: 200 stream; optional: $.exit.core, $.members[].kinds -->\n```sh\ncurl -N y\n```\n```json\n{}\n```\n" +
		"<!-- example: 404 -->\n```sh\ncurl z\n```\n\nprose, then a block that is not the answer\n\n```json\n{}\n```\n")
	exs := parseExamples(page)
	if len(exs) != 3 {
		t.Fatalf("%d examples parsed, want 3: %+v", len(exs), exs)
	}
	if ex := exs[0]; ex.line != 1 || ex.status != "201" || ex.stream || ex.shownKind != "json" || ex.shown != "{\"a\": 1}\n" || ex.name() != "the example at docs/api.md:1 (curl -X POST)" {
		t.Errorf("the first example parsed as %+v, named %q", ex, ex.name())
	}
	if ex := exs[1]; !ex.stream || ex.status != "200" || !ex.optional["$.exit.core"] || !ex.optional["$.members[].kinds"] || len(ex.optional) != 2 {
		t.Errorf("the stream example parsed as %+v", ex)
	}
	if ex := exs[2]; ex.shownKind != "" {
		t.Errorf("an example whose next block comes after prose shows %q", ex.shown)
	}

	stream := `{"schema": "lineage-record", "version": 2}
{"kind": "keep", "process": {"pid": 1, "start": 2}, "reason": "keep 1@2"}
{"kind": "exit", "process": {"pid": 1, "start": 2}, "exit": {"signal": "TERM"}}
{"kind": "end", "reason": "session demo closed"}`
	for _, c := range []struct {
		name, live string
		want       []string
	}{
		{"in another order, with a loss", `{"schema": "x", "version": 2}
{"kind": "exit", "process": {"pid": 5, "start": 6}, "exit": {"signal": "KILL"}}
{"kind": "loss", "count": 3}
{"kind": "keep", "process": {"pid": 5, "start": 6}, "reason": "keep 5@6"}
{"kind": "end", "reason": "session x closed"}`, nil},
		{"a kind not shown, a kind shown missing", `{"schema": "x", "version": 2}
{"kind": "fork", "process": {"pid": 5, "start": 6}}
{"kind": "keep", "process": {"pid": 5, "start": 6}, "reason": "keep 5@6"}
{"kind": "end", "reason": "session x closed"}`, []string{`line 2: a "fork" event, of a kind the page doesn't show`, `the page shows a "exit" event, the daemon's stream had none`}},
		{"a header and an event of another shape", `{"schema": "x"}
{"kind": "keep", "process": {"pid": 5, "start": 6}, "reason": "keep 5@6"}
{"kind": "exit", "process": {"pid": 5, "start": 6}, "exit": {"code": 0}}
{"kind": "end", "reason": "session x closed"}`, []string{"line 1 (the header): $.version: the page shows it", "line 3 (exit): $.exit.signal: the page shows it", "line 3 (exit): $.exit.code: the daemon answered it"}},
	} {
		got := answerDiffs(apiExample{stream: true, shownKind: "json", shown: stream}, c.live)
		if len(got) != len(c.want) {
			t.Errorf("%s: %d differences, want %d: %q", c.name, len(got), len(c.want), got)
			continue
		}
		for i, w := range c.want {
			if !strings.HasPrefix(got[i], w) {
				t.Errorf("%s: difference %d is %q, want it to begin %q", c.name, i, got[i], w)
			}
		}
	}

	metrics := "# HELP lineage_events_total Events.\n# TYPE lineage_events_total counter\nlineage_events_total{kind=\"exec\"} 0\nlineage_sessions 0\n"
	if d := answerDiffs(apiExample{shownKind: "text", shown: metrics}, "# TYPE lineage_events_total counter\nlineage_events_total{kind=\"fork\"} 12\nlineage_sessions 3\ngo_threads 9\n"); d != nil {
		t.Errorf("metrics of other values: %q", d)
	}
	d := answerDiffs(apiExample{shownKind: "text", shown: metrics}, "# TYPE lineage_events_total gauge\nlineage_events_total{type=\"fork\"} 12\n")
	if len(d) != 3 {
		t.Errorf("metrics of another type, labels and a series missing: %d differences, want 3: %q", len(d), d)
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
