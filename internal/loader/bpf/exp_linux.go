package bpf

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/cilium/ebpf/ringbuf"
	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// A knob for the reader benchmark in docs/benchmarks.md ("The reader"),
// removed in the next commit: LINEAGE_EXP_READER=inline reads, decodes and
// delivers in one loop, as before the drain; LINEAGE_EXP_NICE=N runs the
// drain at nice N.
func expInline() bool { return os.Getenv("LINEAGE_EXP_READER") == "inline" }

func expNice() {
	if n, err := strconv.Atoi(os.Getenv("LINEAGE_EXP_NICE")); err == nil {
		_ = unix.Setpriority(unix.PRIO_PROCESS, unix.Gettid(), n)
	}
}

func (b *Tracker) runInline(ctx context.Context, fn func(lineage.Event)) error {
	stop := context.AfterFunc(ctx, func() { _ = b.reader.Flush() })
	defer stop()
	var rec ringbuf.Record
	defer b.syncs.release(^uint64(0))
	for {
		synced, probe := b.syncs.seq(), b.syncs.pending()
		done := ctx.Err() != nil
		if done || probe {
			b.reader.SetDeadline(time.Now())
		} else {
			b.reader.SetDeadline(time.Now().Add(b.opts.Poll))
		}
		err := b.reader.ReadInto(&rec)
		switch {
		case err == nil:
			ev, derr := decode(rec.RawSample)
			if derr != nil {
				b.undecodable.Add(1)
				continue
			}
			fn(ev)
		case errors.Is(err, os.ErrDeadlineExceeded), errors.Is(err, ringbuf.ErrFlushed):
			b.syncs.release(synced)
			if done {
				return nil
			}
		case errors.Is(err, ringbuf.ErrClosed):
			return nil
		default:
			return fmt.Errorf("read events: %w", err)
		}
	}
}
