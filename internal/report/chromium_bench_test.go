package report

import (
	"bytes"
	"os"
	"testing"
)

// BenchmarkHTMLChromium opens the HTML report of a 20,000-process record
// shaped like this project's `make test` (suite) in headless Chromium, in a
// 1280×800 window, and reports the page's size, the time to its first
// contentful paint (Chromium's paint timing, from the start of navigation:
// reading, parsing and the script's first render), the time the script
// takes to render, and the time to open every subtree (20,000 rows).
//
//	go test -run '^$' -bench BenchmarkHTMLChromium -benchtime 5x ./internal/report
func BenchmarkHTMLChromium(b *testing.B) {
	var rec bytes.Buffer
	suite(b, &rec, suiteProcesses)
	rep := build(b, rec.Bytes())
	path := writePage(b, rep)
	st, err := os.Stat(path)
	must(b, err)
	d := startDevtools(b, 1280, 800)
	var fcp, render, expand float64
	b.ResetTimer()
	for range b.N {
		d.open(path)
		d.await(`performance.getEntriesByName("first-contentful-paint").length > 0`)
		var t struct{ FCP, Render, Expand float64 }
		d.eval(`(function () {
			var t = performance.now();
			document.getElementById("expand").click();
			return {FCP: performance.getEntriesByName("first-contentful-paint")[0].startTime,
				Render: +document.body.dataset.renderMs, Expand: performance.now() - t};
		})()`, &t)
		fcp += t.FCP
		render += t.Render
		expand += t.Expand
	}
	n := float64(b.N)
	b.ReportMetric(fcp/n, "first-paint-ms")
	b.ReportMetric(render/n, "render-ms")
	b.ReportMetric(expand/n, "open-all-ms")
	b.ReportMetric(float64(st.Size())/(1<<20), "page-MiB")
	b.ReportMetric(float64(rep.Summary.Processes), "processes")
}
