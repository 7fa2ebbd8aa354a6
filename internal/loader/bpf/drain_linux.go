package bpf

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/ringbuf"
)

// Run reads the ring buffer on a thread of its own (drain) and delivers
// from another goroutine: a reader that only copies records out frees the
// ring's room many times faster than one that decodes them and waits on
// their consumer, so that the few time slices a busy machine gives it
// are enough. Records wait in batches between the two, batchesQueued of
// them at most: past that, the drain waits, the ring fills and the kernel
// counts (and logs) what it drops. docs/benchmarks.md ("The reader") has
// what it bought (a higher priority for the drain's thread bought
// nothing that could be told from the noise, and is not taken).
const (
	batchRecords  = 512
	batchBytes    = 128 << 10
	batchesQueued = 64
)

// batch is records read from the ring buffer one after the other: their
// bytes back to back in raw, record i ending at ends[i]. With empty set,
// the read after them found the ring empty, which lets go the callers of
// Sync registered up to synced once the records are delivered.
type batch struct {
	raw    []byte
	ends   []int
	empty  bool
	synced uint64
}

func (bt *batch) add(rec []byte) {
	bt.raw = append(bt.raw, rec...)
	bt.ends = append(bt.ends, len(bt.raw))
}

func (bt *batch) full() bool { return len(bt.ends) >= batchRecords || len(bt.raw) >= batchBytes }

// records calls fn with each record of bt, in order.
func (bt *batch) records(fn func([]byte)) {
	start := 0
	for _, end := range bt.ends {
		fn(bt.raw[start:end])
		start = end
	}
}

func (bt *batch) reset() {
	bt.raw, bt.ends, bt.empty, bt.synced = bt.raw[:0], bt.ends[:0], false, 0
}

// batches hands batches from the drain to the deliverer and back.
type batches struct {
	full, free chan *batch
}

func newBatches() *batches {
	return &batches{full: make(chan *batch, batchesQueued), free: make(chan *batch, batchesQueued+1)}
}

// get returns a cleared batch: a recycled one, or a new one.
func (q *batches) get() *batch {
	select {
	case bt := <-q.free:
		bt.reset()
		return bt
	default:
		return &batch{raw: make([]byte, 0, batchBytes), ends: make([]int, 0, batchRecords)}
	}
}

func (q *batches) put(bt *batch) {
	select {
	case q.free <- bt:
	default:
	}
}

// drain copies the ring buffer's records into batches for q until ctx is
// done and the ring is empty, or the reader is closed; then it closes
// q.full. It runs on a thread of its own.
func (b *Tracker) drain(ctx context.Context, q *batches) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	defer close(q.full)
	var rec ringbuf.Record
	var sent uint64 // the last Sync sequence a batch lets go
	bt := q.get()
	bt = b.drainBacklog(q, bt, &rec)
	for {
		// A Sync that came while the last read waited needs a read that
		// begins after it: one that doesn't wait. One whose read is done
		// waits for the deliverer, not for another read.
		synced, probe := b.syncs.seq(), b.syncs.pending()
		done := ctx.Err() != nil
		if done || (probe && synced > sent) {
			// Deliver what is pending, then stop.
			b.reader.SetDeadline(time.Now())
		} else {
			b.reader.SetDeadline(time.Now().Add(b.opts.Poll))
		}
		err := b.reader.ReadInto(&rec)
		switch {
		case err == nil:
			bt.add(rec.RawSample)
			// Hand over a full batch, or whatever was there once the
			// ring is empty, so that a quiet lineage's events come now.
			if bt.full() || rec.Remaining == 0 {
				q.full <- bt
				bt = q.get()
				_ = b.lookForGaps(false)
			}
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, ringbuf.ErrFlushed):
			// The ring was read empty: a Sync, or the reader's stop, looks
			// at the drop log before it lets go, so that the gaps are
			// whole up to it, and drops after it are a gap of their own.
			_ = b.lookForGaps(synced > sent || done)
			if synced > sent || len(bt.ends) > 0 || done {
				bt.empty, bt.synced = true, synced
				q.full <- bt
				bt, sent = q.get(), synced
			}
			if done {
				return nil
			}
		case errors.Is(err, ringbuf.ErrClosed):
			if len(bt.ends) > 0 {
				q.full <- bt
			}
			return nil
		default:
			return fmt.Errorf("read events: %w", err)
		}
	}
}

// backlogRing is the ring buffer of a set that was moved into this one.
type backlogRing struct {
	m *ebpf.Map
	r *ringbuf.Reader
}

// drainBacklog hands every record of the backlog rings to q, in batches
// that continue bt, then closes them; it returns the batch being filled.
// Their programs are detached (the sets are unpinned): nothing more comes.
func (b *Tracker) drainBacklog(q *batches, bt *batch, rec *ringbuf.Record) *batch {
	b.backlogMu.Lock()
	rings := b.backlog
	b.backlogMu.Unlock()
	for _, ring := range rings {
		ring.r.SetDeadline(time.Now())
		for ring.r.ReadInto(rec) == nil {
			bt.add(rec.RawSample)
			if bt.full() {
				q.full <- bt
				bt = q.get()
			}
		}
	}
	b.closeBacklog()
	return bt
}

// closeBacklog closes the backlog rings; later calls do nothing.
func (b *Tracker) closeBacklog() {
	b.backlogMu.Lock()
	defer b.backlogMu.Unlock()
	for _, ring := range b.backlog {
		_ = ring.r.Close()
		_ = ring.m.Close()
	}
	b.backlog = nil
}
