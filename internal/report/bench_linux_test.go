package report

import (
	"bytes"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/record"
)

// cpuTime is the CPU time this process has used, user and system: on a
// shared machine it says more about the cost than the wall clock does.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkReport reads and renders a record of 100,000 events (about
// 33,000 processes: fork, exec, exit each) in every format, as `lineage
// report` does: read, rebuild, write. The target is under a second each.
//
//	go test -run '^$' -bench BenchmarkReport -benchtime 5x ./internal/report
func BenchmarkReport(b *testing.B) {
	var rec bytes.Buffer
	synthetic(b, &rec, 100_000/3, 1)
	formats := map[string]func(*Report, io.Writer) error{
		"tree":         func(r *Report, w io.Writer) error { return r.WriteText(w, TextOptions{}) },
		"json":         (*Report).WriteJSON,
		"html":         (*Report).WriteHTML,
		"chrome-trace": (*Report).WriteChromeTrace,
	}
	for _, name := range []string{"tree", "json", "html", "chrome-trace"} {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(rec.Len()))
			b.ReportMetric(float64(rec.Len())/(1<<20), "record-MiB")
			cpu := cpuTime()
			defer func() { b.ReportMetric(float64((cpuTime()-cpu).Milliseconds())/float64(b.N), "cpu-ms/op") }()
			for range b.N {
				r, err := record.NewReader(bytes.NewReader(rec.Bytes()))
				must(b, err)
				rep, err := Build(r)
				must(b, err)
				if rep.Summary.Events < 100_000-3 {
					b.Fatalf("%d events", rep.Summary.Events)
				}
				must(b, formats[name](rep, io.Discard))
			}
		})
	}
}
