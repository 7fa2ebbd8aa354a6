package report

import (
	"io"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/record"
)

// countingWriter counts the bytes that pass through it.
type countingWriter struct {
	w io.Writer
	n atomic.Int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n.Add(int64(n))
	return n, err
}

// TestLargeRecordBoundedMemory streams a generated record of
// LINEAGE_LARGE_RECORD_MB megabytes (1024 for the 1 GB check; it is slow,
// so it runs only when the variable is set) through Build and the streaming
// renderers, and checks that the heap grows with the processes, not with
// the record: the report keeps one entry per process, never its lines.
func TestLargeRecordBoundedMemory(t *testing.T) {
	mb, _ := strconv.Atoi(os.Getenv("LINEAGE_LARGE_RECORD_MB"))
	if mb <= 0 {
		t.Skip("set LINEAGE_LARGE_RECORD_MB=1024 to stream a 1 GB record")
	}
	// Each process is about 5 KB of record: fork, 17 execs, exit.
	const execs, perProcess = 17, 5200
	procs := mb << 20 / perProcess
	pr, pw := io.Pipe()
	cw := &countingWriter{w: pw}
	go func() {
		synthetic(t, cw, procs, execs)
		pw.Close()
	}()
	var peak atomic.Uint64
	stop := make(chan struct{})
	go sampleHeap(&peak, stop)
	r, err := record.NewReader(pr)
	must(t, err)
	rep, err := Build(r)
	must(t, err)
	for _, write := range []func(io.Writer) error{rep.WriteJSON, rep.WriteChromeTrace, func(w io.Writer) error { return rep.WriteText(w, TextOptions{}) }} {
		must(t, write(io.Discard))
	}
	close(stop)
	size := cw.n.Load()
	t.Logf("record %d MiB, %d events, %d processes: peak heap %d MiB", size>>20, rep.Summary.Events, rep.Summary.Processes, peak.Load()>>20)
	if rep.Summary.Processes != procs {
		t.Errorf("%d processes, want %d", rep.Summary.Processes, procs)
	}
	// One entry per process (with its argv), garbage not yet collected and
	// the generator's own: 64 MiB plus 1.5 KiB a process, whatever the
	// record's size. Measured: 281 MiB for 1,064 MiB and 206,488 processes.
	if limit := uint64(64<<20 + procs*1536); peak.Load() > limit {
		t.Errorf("peak heap %d MiB, more than %d MiB for %d processes", peak.Load()>>20, limit>>20, procs)
	}
}

// sampleHeap records the largest live heap seen until stop is closed.
func sampleHeap(peak *atomic.Uint64, stop chan struct{}) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
		}
		metrics.Read(s)
		if v := s[0].Value.Uint64(); v > peak.Load() {
			peak.Store(v)
		}
		runtime.Gosched()
	}
}
