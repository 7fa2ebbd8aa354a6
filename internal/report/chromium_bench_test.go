package report

import (
	"bytes"
	"os"
	"testing"
)

// BenchmarkHTMLChromium opens the HTML report of a 20,000-process record
// shaped like this project's `make test` (suite) in headless Chromium, in a
// 1280×800 window, and reports the page's size; from the start of
// navigation, Chromium's first contentful paint (the header, painted while
// the data is still being parsed) and the paint of the frame that shows the
// script's work, the summary and the tree (the page's data-painted-ms); the
// time the script takes to render; and the time to open every subtree
// (20,000 rows).
//
// With LINEAGE_BENCH_RECORD=FILE it opens the report of that record
// instead (a real one: `lineage run --record FILE -- make test`).
//
//	go test -run '^$' -bench BenchmarkHTMLChromium -benchtime 5x ./internal/report
func BenchmarkHTMLChromium(b *testing.B) {
	var rec bytes.Buffer
	if path := os.Getenv("LINEAGE_BENCH_RECORD"); path != "" {
		data, err := os.ReadFile(path)
		must(b, err)
		rec.Write(data)
	} else {
		suite(b, &rec, suiteProcesses)
	}
	rep := build(b, rec.Bytes())
	path := writePage(b, rep)
	st, err := os.Stat(path)
	must(b, err)
	d := startDevtools(b, 1280, 800)
	var fcp, painted, render, expand float64
	b.ResetTimer()
	for range b.N {
		d.open(path)
		d.await(`performance.getEntriesByName("first-contentful-paint").length > 0 && document.body.dataset.paintedMs`)
		var t struct{ FCP, Painted, Render, Expand float64 }
		d.eval(`(function () {
			var t = performance.now();
			document.getElementById("expand").click();
			return {FCP: performance.getEntriesByName("first-contentful-paint")[0].startTime,
				Painted: +document.body.dataset.paintedMs, Render: +document.body.dataset.renderMs,
				Expand: performance.now() - t};
		})()`, &t)
		fcp += t.FCP
		painted += t.Painted
		render += t.Render
		expand += t.Expand
	}
	n := float64(b.N)
	b.ReportMetric(fcp/n, "first-paint-ms")
	b.ReportMetric(painted/n, "summary-painted-ms")
	b.ReportMetric(render/n, "render-ms")
	b.ReportMetric(expand/n, "open-all-ms")
	b.ReportMetric(float64(st.Size())/(1<<20), "page-MiB")
	b.ReportMetric(float64(rep.Summary.Processes), "processes")
}
