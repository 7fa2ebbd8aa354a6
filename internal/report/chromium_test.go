package report

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

// RequireChromiumEnv turns the Chromium tests' skip into a failure: CI sets
// it where chromium is installed.
const RequireChromiumEnv = "LINEAGE_REQUIRE_CHROMIUM"

// chromium returns the path of a Chromium browser, or skips tb (fails it
// under LINEAGE_REQUIRE_CHROMIUM).
func chromium(tb testing.TB) string {
	tb.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			return path
		}
	}
	if os.Getenv(RequireChromiumEnv) != "" {
		tb.Fatalf("chromium is required (%s is set) but not installed: apt-get install chromium", RequireChromiumEnv)
	}
	tb.Skip("chromium is not installed (apt-get install chromium)")
	return ""
}

// writePage writes rep's HTML page to a file of tb's and returns its path.
func writePage(tb testing.TB, rep *Report) string {
	tb.Helper()
	var page bytes.Buffer
	must(tb, rep.WriteHTML(&page))
	path := filepath.Join(tb.TempDir(), "report.html")
	must(tb, os.WriteFile(path, page.Bytes(), 0o600))
	return path
}

// pageState is what the tests read of a rendered page.
type pageState struct {
	// Rows is how many rows the tree shows (scrolled or not); Drawn the
	// processes' rows in the page now, by process index, and Folds the
	// rows that fold a process's other children, by the process's.
	Rows  int   `json:"rows"`
	Drawn []int `json:"drawn"`
	Folds []int `json:"folds"`
	// Toggles are the drawn rows' open (▾) or closed (▸) marks, "" for a
	// leaf, by process index.
	Toggles map[string]string `json:"toggles"`
	// Labels are the drawn rows' text, by process index.
	Labels map[string]string `json:"labels"`
	// Viewport is the window's height; the bottoms say where the summary's
	// parts end.
	Viewport      float64 `json:"viewport"`
	SummaryTop    float64 `json:"summary_top"`
	LeaksBottom   float64 `json:"leaks_bottom"`
	LossesBottom  float64 `json:"losses_bottom"`
	LeakLinks     []int   `json:"leak_links"`
	LeakLinksLast float64 `json:"leak_links_bottom"`
	Images        int     `json:"images"`
}

const readState = `(function () {
	var s = {rows: +document.getElementById("tree").dataset.rows, drawn: [], folds: [], toggles: {}, labels: {},
		viewport: window.innerHeight, images: document.querySelectorAll("img").length, leak_links: []};
	document.querySelectorAll("#layer .row").forEach(function (r) {
		if (r.dataset.fold !== undefined) { s.folds.push(+r.dataset.fold); return; }
		s.drawn.push(+r.dataset.i);
		s.toggles[r.dataset.i] = r.querySelector(".tog").textContent;
		s.labels[r.dataset.i] = r.querySelector(".label").textContent;
	});
	s.summary_top = document.getElementById("summary").getBoundingClientRect().top;
	s.leaks_bottom = document.getElementById("card-leaks").getBoundingClientRect().bottom;
	s.losses_bottom = document.getElementById("card-losses").getBoundingClientRect().bottom;
	var last = 0;
	document.querySelectorAll("#card-leaks a.proc").forEach(function (a) {
		s.leak_links.push(+a.dataset.i);
		last = Math.max(last, a.getBoundingClientRect().bottom);
	});
	s.leak_links_bottom = last;
	return s;
})()`

func (d *devtools) state() pageState {
	d.tb.Helper()
	var s pageState
	d.eval(readState, &s)
	return s
}

// treeModel is the report's tree by page index, as the page receives it.
type treeModel struct {
	procs []*Process
	up    []int
	kids  [][]int
	index map[*Process]int
}

func modelOf(rep *Report) *treeModel {
	m := &treeModel{index: map[*Process]int{}}
	var path []int
	rep.Walk(func(p *Process) bool {
		i := len(m.procs)
		m.index[p] = i
		path = append(path[:p.Depth], i)
		up := -1
		if p.Depth > 0 {
			up = path[p.Depth-1]
			m.kids[up] = append(m.kids[up], i)
		}
		m.procs, m.up, m.kids = append(m.procs, p), append(m.up, up), append(m.kids, nil)
		return true
	})
	return m
}

// The states of a row, as the page draws them.
const (
	rowClosed = "▸"
	rowPaths  = "▿" // open on the paths to its leaks (or matches) alone
	rowOpen   = "▾"
)

// defaultState is how the page opens process i: on its paths when a leak
// is below it; open when it is a top without one, or the only child of one
// so opened; closed otherwise ("" for a leaf).
func (m *treeModel) defaultState(i int) string {
	p := m.procs[i]
	switch up := m.up[i]; {
	case p.leaksBelow-b2i(p.Leaked) > 0:
		return rowPaths
	case len(m.kids[i]) == 0:
		return ""
	case up < 0 || len(m.kids[up]) == 1 && m.defaultState(up) == rowOpen:
		return rowOpen
	}
	return rowClosed
}

// rows counts the rows a page shows (folds of hidden children included)
// when each process is in the state given, and target says which
// processes' subtrees hold a leak (or a match). Filtering, only the tops
// with a target are shown.
func (m *treeModel) rows(state func(i int) string, target func(i int) bool, filtering bool) int {
	var count func(i int) int
	count = func(i int) int {
		n := 1
		hidden := 0
		for _, c := range m.kids[i] {
			switch state(i) {
			case rowOpen:
				n += count(c)
			case rowPaths:
				if target(c) {
					n += count(c)
				} else {
					hidden++
				}
			}
		}
		return n + b2i(hidden > 0)
	}
	n := 0
	for i, up := range m.up {
		if up < 0 && (!filtering || target(i)) {
			n += count(i)
		}
	}
	return n
}

// leakIn reports whether page index i's subtree holds a leak.
func (m *treeModel) leakIn(i int) bool { return m.procs[i].leaksBelow > 0 }

// filtered counts the rows a filter shows: the processes whose subtree
// holds a match, open on the paths to them; and the matches.
func (m *treeModel) filtered(match func(p *Process) bool) (rows, matches int) {
	in := make([]int, len(m.procs)) // matches in each subtree
	for i := len(m.procs) - 1; i >= 0; i-- {
		if match(m.procs[i]) {
			in[i]++
			matches++
		}
		if m.up[i] >= 0 {
			in[m.up[i]] += in[i]
		}
	}
	state := func(i int) string {
		if in[i] > b2i(match(m.procs[i])) {
			return rowPaths
		}
		return rowClosed
	}
	return m.rows(state, func(i int) bool { return in[i] > 0 }, true), matches
}

func TestHTMLInChromium(t *testing.T) {
	rep := build(t, fixture(t))
	m := modelOf(rep)
	d := startDevtools(t, 1280, 800)
	d.open(writePage(t, rep))
	s := d.state()
	// The paths to the two leaks are open: the shell shows make and the
	// dev server, make only the daemon, its four other children folded.
	mk := m.index[findPID(t, rep, 1001)]
	if want := m.rows(m.defaultState, m.leakIn, false); s.Rows != want || want != 5 || len(s.Drawn) != 4 || len(s.Folds) != 1 || s.Folds[0] != mk {
		t.Errorf("%d rows, %d drawn, folds %v, want 5 rows: 4 processes and make's fold", s.Rows, len(s.Drawn), s.Folds)
	}
	for _, i := range s.Drawn {
		if got, want := s.Toggles[fmt.Sprint(i)], m.defaultState(i); got != want {
			t.Errorf("%s is %q, want %q", CommandLine(m.procs[i]), got, want)
		}
	}
	if strings.Count(strings.Join(mapValues(s.Labels), "\n"), "LEAK") != 2 {
		t.Errorf("leak badges in %v, want 2", s.Labels)
	}
	// The header's command is quoted for a shell, as the text report's.
	var meta string
	d.eval(`document.getElementById("meta").textContent`, &meta)
	if !strings.HasSuffix(meta, "command: sh -c 'make -j3'") {
		t.Errorf("the page's header line %q, want it to end with the quoted command", meta)
	}
	// Hovering a row tells its process's story; hovering the fold, none.
	daemon := m.index[findPID(t, rep, 1020)]
	var tip struct {
		Shown bool   `json:"shown"`
		Text  string `json:"text"`
	}
	const readTip = `(function () { var t = document.getElementById("tip"); return {shown: t.style.display === "block", text: t.textContent}; })()`
	d.hover(fmt.Sprintf(`#layer .row[data-i="%d"] .label`, daemon))
	d.eval(readTip, &tip)
	for _, want := range []string{"redis-server --daemonize yes", "pid 1020 (start 10060), lineage parent 1001@10001", "reaped: TERM→KILL, killed", "LEAK: alive when its root ended", "outlived its root"} {
		if !tip.Shown || !strings.Contains(tip.Text, want) {
			t.Errorf("the daemon's tip (shown %v) lacks %q:\n%s", tip.Shown, want, tip.Text)
		}
	}
	d.hover(fmt.Sprintf(`#layer .row[data-fold="%d"]`, mk))
	if d.eval(readTip, &tip); tip.Shown {
		t.Errorf("the fold shows a tip: %q", tip.Text)
	}
	// A click on the fold opens make: the pipeline is closed, its 2
	// descendants counted; two more clicks open it down to the echo.
	d.click(fmt.Sprintf(`#layer .row[data-fold="%d"]`, mk))
	s = d.state()
	pipeline := m.index[findPID(t, rep, 1010)]
	if s.Rows != 8 || s.Toggles[fmt.Sprint(pipeline)] != rowClosed || !strings.HasSuffix(s.Labels[fmt.Sprint(pipeline)], "+2") {
		t.Errorf("after the fold's click: %d rows, want 8; the pipeline %q %q, want it closed with its 2 descendants counted", s.Rows, s.Toggles[fmt.Sprint(pipeline)], s.Labels[fmt.Sprint(pipeline)])
	}
	d.click(fmt.Sprintf(`#layer .row[data-i="%d"] .tog`, pipeline))
	d.click(fmt.Sprintf(`#layer .row[data-i="%d"] .tog`, pipeline+1))
	s = d.state()
	if s.Rows != 10 {
		t.Errorf("%d rows after opening the pipeline, want all 10", s.Rows)
	}
	echo := fmt.Sprint(m.index[findPID(t, rep, 1012)])
	if s.Images != 0 {
		t.Error("argv injected an element into the page")
	}
	if !strings.Contains(s.Labels[echo], "</script><img src=x onerror=alert(1)>") {
		t.Errorf("the hostile argv is not shown as text: %q", s.Labels[echo])
	}
	// A click on an open process closes it.
	d.click(fmt.Sprintf(`#layer .row[data-i="%d"] .tog`, mk))
	if s = d.state(); s.Rows != 5 || s.Toggles[fmt.Sprint(mk)] != rowPaths {
		t.Errorf("after closing make: %d rows, make %q, want 5 rows and make back on its paths", s.Rows, s.Toggles[fmt.Sprint(mk)])
	}
	if c := d.consoleMessages(); len(c) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(c, "\n"))
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// suiteProcesses is the size of the large page the tests and benchmarks
// open: about this project's `make test`.
const suiteProcesses = 20_000

// The HTML of a 20,000-process record in Chromium: the summary and the
// leaks in the first screen, subtrees closed but the paths to the leaks,
// a click that opens one, filters by argv and by outcome that work, and a
// summary's link that shows its process.
func TestHTMLInChromiumManyProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("short: starts a browser on 20,000 processes")
	}
	var rec bytes.Buffer
	facts := suite(t, &rec, suiteProcesses)
	rep := build(t, rec.Bytes())
	if rep.Summary.Processes != facts.processes || rep.Summary.Leaks != facts.leaks || rep.Summary.Processes < suiteProcesses {
		t.Fatalf("summary %+v, want %d processes and %d leaks", rep.Summary, facts.processes, facts.leaks)
	}
	m := modelOf(rep)
	d := startDevtools(t, 1280, 800)
	d.open(writePage(t, rep))
	s := d.state()
	if c := d.consoleMessages(); len(c) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(c, "\n"))
	}

	// The first screen: the summary, its leaks card whole, each of its
	// links a leak, and the losses card.
	if s.SummaryTop > s.Viewport/4 || s.LeaksBottom > s.Viewport || s.LossesBottom > s.Viewport {
		t.Errorf("the summary (top %v, leaks card to %v, losses card to %v) is not in the first screen of %v", s.SummaryTop, s.LeaksBottom, s.LossesBottom, s.Viewport)
	}
	if len(s.LeakLinks) == 0 || s.LeakLinksLast > s.Viewport {
		t.Errorf("leak links %v end at %v, below the first screen", s.LeakLinks, s.LeakLinksLast)
	}
	for _, i := range s.LeakLinks {
		if !m.procs[i].Leaked {
			t.Errorf("the leaks card links %v, no leak", m.procs[i].ID)
		}
	}

	// Subtrees closed, but the path to every leak open, the other
	// children of each process on it folded.
	want := m.rows(m.defaultState, m.leakIn, false)
	if s.Rows != want || want > rep.Summary.Processes/10 {
		t.Errorf("%d rows shown, want %d of %d processes", s.Rows, want, rep.Summary.Processes)
	}
	if len(s.Drawn)+len(s.Folds) >= s.Rows || len(s.Drawn) > 200 {
		t.Errorf("%d rows in the page for %d shown: the page draws more than it can show", len(s.Drawn)+len(s.Folds), s.Rows)
	}
	for _, i := range s.Drawn {
		if got, want := s.Toggles[fmt.Sprint(i)], m.defaultState(i); got != want {
			t.Errorf("%s is %q, want %q", CommandLine(m.procs[i]), got, want)
		}
	}
	if len(s.Folds) == 0 {
		t.Fatal("no fold among the first rows: the paths show every sibling")
	}

	// A click on a fold shows the children it folded, closed.
	fold := s.Folds[0]
	d.click(fmt.Sprintf(`#layer .row[data-fold="%d"]`, fold))
	s2 := d.state()
	if s2.Toggles[fmt.Sprint(fold)] != rowOpen || s2.Rows <= s.Rows {
		t.Errorf("after its fold's click, %s is %q with %d rows, want open, more than %d", CommandLine(m.procs[fold]), s2.Toggles[fmt.Sprint(fold)], s2.Rows, s.Rows)
	}
	// A click opens a closed row: its children join the rows.
	closed := -1
	for _, i := range s2.Drawn {
		if s2.Toggles[fmt.Sprint(i)] == rowClosed {
			closed = i
			break
		}
	}
	if closed < 0 {
		t.Fatal("no closed row among the children the fold showed")
	}
	d.click(fmt.Sprintf(`#layer .row[data-i="%d"] .tog`, closed))
	if after := d.state(); after.Rows != s2.Rows+len(m.kids[closed]) || after.Toggles[fmt.Sprint(closed)] != rowOpen {
		t.Errorf("opening %s: %d rows, want %d", CommandLine(m.procs[closed]), after.Rows, s2.Rows+len(m.kids[closed]))
	}

	// The search box filters by argv: the matches, on the paths to them.
	d.typeInto("#search", "go-build/b017/")
	wantRows, matches := m.filtered(func(p *Process) bool {
		return strings.Contains(strings.ToLower(CommandLine(p)+" "+fmt.Sprint(p.ID.PID)+" "+p.Exe), "go-build/b017/")
	})
	d.await(fmt.Sprintf(`+document.getElementById("tree").dataset.rows === %d`, wantRows))
	s = d.state()
	if matches != 1 || len(s.Drawn) != 4 {
		t.Errorf("search: %d matches, %d rows drawn (%v), want 1 match under 3 ancestors", matches, len(s.Drawn), s.Labels)
	}
	for _, label := range s.Labels {
		if !strings.Contains(label, "pkg017.test") && !strings.Contains(label, "make test") && !strings.Contains(label, "go test") {
			t.Errorf("search shows %q", label)
		}
	}

	// The outcome menu filters by outcome; with the search cleared, kept
	// shows the kept on their paths.
	d.eval(`(function () {
		var s = document.getElementById("search"); s.value = ""; s.dispatchEvent(new Event("input"));
		var o = document.getElementById("outcome"); o.value = "kept"; o.dispatchEvent(new Event("change"));
	})()`, nil)
	wantRows, matches = m.filtered(func(p *Process) bool { return p.Outcome == lineage.Kept })
	d.await(fmt.Sprintf(`+document.getElementById("tree").dataset.rows === %d`, wantRows))
	if matches != facts.kept || matches == 0 {
		t.Errorf("%d kept, want %d", matches, facts.kept)
	}
	s = d.state()
	for k, label := range s.Labels {
		var i int
		fmt.Sscan(k, &i)
		if p := m.procs[i]; p.Outcome != lineage.Kept && p.descendants == 0 {
			t.Errorf("the kept filter shows %q, neither kept nor an ancestor", label)
		}
	}

	// And events not recorded: the processes the gap touched.
	d.eval(`(function () { var o = document.getElementById("outcome"); o.value = "missing"; o.dispatchEvent(new Event("change")); })()`, nil)
	wantRows, matches = m.filtered(func(p *Process) bool { return len(p.Missing) > 0 })
	d.await(fmt.Sprintf(`+document.getElementById("tree").dataset.rows === %d`, wantRows))
	if matches != len(facts.missing) {
		t.Errorf("%d processes with events not recorded, want %d", matches, len(facts.missing))
	}

	// A leak's link in the summary clears the filter and shows its row.
	leak := s.LeakLinks
	d.eval(`(function () { var o = document.getElementById("outcome"); o.value = ""; o.dispatchEvent(new Event("change")); })()`, nil)
	last := d.state().LeakLinks
	if len(last) == 0 || len(leak) == 0 {
		t.Fatal("no leak links")
	}
	target := last[len(last)-1]
	d.click(fmt.Sprintf(`#card-leaks a.proc[data-i="%d"]`, target))
	var seen struct {
		Drawn  bool    `json:"drawn"`
		Marked bool    `json:"marked"`
		Top    float64 `json:"top"`
		Bottom float64 `json:"bottom"`
	}
	d.eval(fmt.Sprintf(`(function () {
		var r = document.querySelector('#layer .row[data-i="%d"]'), box = document.getElementById("tree").getBoundingClientRect();
		if (!r) return {drawn: false};
		var b = r.getBoundingClientRect();
		return {drawn: true, marked: r.classList.contains("hl"), top: b.top - box.top, bottom: box.bottom - b.bottom};
	})()`, target), &seen)
	if !seen.Drawn || !seen.Marked || seen.Top < 0 || seen.Bottom < 0 {
		var dbg any
		d.eval(`[document.getElementById("tree").scrollTop, document.getElementById("tree").dataset.rows, Array.from(document.querySelectorAll("#layer .row")).map(function(r){return r.dataset.i}).join(","), window.scrollY]`, &dbg)
		t.Errorf("after its link, the leak's row %d: %+v %v", target, seen, dbg)
	}
	if c := d.consoleMessages(); len(c) > 0 {
		t.Errorf("console messages:\n%s", strings.Join(c, "\n"))
	}
}
