package report

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// treePart returns the tree of a text report, each line cut after its
// command line (before "  pid"), the summary and footer left out.
func treePart(t *testing.T, rep *Report, opts TextOptions) []string {
	t.Helper()
	var buf bytes.Buffer
	must(t, rep.WriteText(&buf, opts))
	parts := strings.Split(buf.String(), "\n\n")
	if len(parts) < 3 {
		t.Fatalf("no tree in:\n%s", buf.String())
	}
	var lines []string
	for _, l := range strings.Split(parts[2], "\n") {
		lines = append(lines, regexp.MustCompile(`  pid \d+ .*$`).ReplaceAllString(l, ""))
	}
	return lines
}

func TestTextLeaksOnlyAndDepth(t *testing.T) {
	rep := build(t, fixture(t))
	for _, tc := range []struct {
		name string
		opts TextOptions
		want []string
	}{
		{"leaks only", TextOptions{LeaksOnly: true}, []string{
			"sh -c 'make -j3'",
			"├─ make -j3",
			"│  └─ LEAK redis-server --daemonize yes",
			"└─ LEAK npm run dev",
			"(leaks only: 4 of 10 processes drawn, those on the paths to the 2 leaks)",
		}},
		{"depth 1", TextOptions{Levels: 2}, []string{
			"sh -c 'make -j3'",
			"├─ make -j3",
			"│  └─ … 7 more processes, 1 leak among them",
			"└─ LEAK npm run dev",
		}},
		{"depth 0", TextOptions{Levels: 1}, []string{
			"sh -c 'make -j3'",
			"└─ … 9 more processes, 2 leaks among them",
		}},
		{"depth 3", TextOptions{Levels: 4}, []string{
			"sh -c 'make -j3'",
			"├─ make -j3",
			"│  ├─ cc -c a.c",
			"│  ├─ cc -c b.c",
			"│  ├─ cc -c c.c",
			"│  ├─ sh -c 'tr a b | wc'",
			"│  │  └─ tr a b",
			"│  │     └─ … 1 more process",
			"│  └─ LEAK redis-server --daemonize yes",
			"└─ LEAK npm run dev",
		}},
		{"leaks only, depth 1", TextOptions{LeaksOnly: true, Levels: 2}, []string{
			"sh -c 'make -j3'",
			"├─ make -j3",
			"│  └─ … 7 more processes, 1 leak among them",
			"└─ LEAK npm run dev",
			"(leaks only: 3 of 10 processes drawn, those on the paths to the 2 leaks)",
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := treePart(t, rep, tc.opts)
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("tree:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A record without leaks, drawn leaks-only, says so.
func TestTextLeaksOnlyWithoutLeaks(t *testing.T) {
	in := header + "\n" + line(`"kind":"fork","boot_ns":1000000,"process":{"pid":7,"start":1},"parent":{"pid":2,"start":1},"root":{"pid":7,"start":1}`)
	got := treePart(t, build(t, []byte(in)), TextOptions{LeaksOnly: true})
	// Nothing drawn, no count of paths to no leaks.
	if len(got) != 1 || got[0] != "no leaks: no process of the 1 in the record was alive when its root ended" {
		t.Errorf("tree %q", got)
	}
}

// At 20,000 processes, the summary leads: every list of it comes before the
// tree, the leaks named, the gap placed.
func TestTextSummaryOfASuite(t *testing.T) {
	var rec bytes.Buffer
	facts := suite(t, &rec, suiteProcesses)
	rep := build(t, rec.Bytes())
	var buf bytes.Buffer
	must(t, rep.WriteText(&buf, TextOptions{Levels: 3}))
	out := buf.String()
	summary, _, ok := strings.Cut(out, "\n\nsh -c 'make test'")
	if !ok {
		t.Fatalf("no tree after the summary:\n%s", out[:min(len(out), 4000)])
	}
	f := facts
	for _, want := range []string{
		fmt.Sprintf("summary: %d processes (1 root), %d leaks, %d kept, %d reaped (%d killed), %d outlived their root", f.processes, f.leaks, f.kept, f.leaks-f.kept, f.killed, f.leaks),
		fmt.Sprintf("  leaks: %d (--leaks-only draws their paths)\n    sleep 97.", f.leaks), fmt.Sprintf("    … and %d more", f.leaks-5),
		fmt.Sprintf("  kept: %d\n", f.kept), fmt.Sprintf("  reaped: %d\n", f.leaks-f.kept), "  longest-lived:\n    sh -c 'make test'",
		fmt.Sprintf("  outlived their root: %d\n", f.leaks),
		"  top spawners by children:\n    go test -race -count=1 ./...  pid 2002  5081 children",
		"  top spawners by CPU time: not recorded",
		fmt.Sprintf("  losses: %d events in 1 loss, %d processes marked\n    events lost: %d, between +10.000s and +10.040s, naming 2 processes: %d processes touched",
			f.lost, len(f.missing), f.lost, len(f.missing)),
	} {
		if !strings.Contains(summary, want) {
			t.Errorf("the summary lacks %q:\n%s", want, summary)
		}
	}
	marked := map[lineage.Identity][]record.Kind{}
	for _, m := range rep.Missing {
		marked[m.Process] = m.Events
	}
	if !mapsEqual(marked, facts.missing) {
		t.Errorf("marked %v, want the %d the gap took: %v", marked, len(facts.missing), facts.missing)
	}
	if n := strings.Count(out, "\n"); n > 500 {
		t.Errorf("the tree cut at depth 2 is %d lines", n)
	}
}
