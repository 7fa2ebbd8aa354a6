package record

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sync"
	"time"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/lineage"
)

// Options tune a [Writer]. The zero value redacts nothing and reads the
// system's clocks.
type Options struct {
	// Redact, if set, masks every match in every argv word (exec events and
	// the argv the reaper reports) before the event is written.
	Redact *regexp.Regexp
	// Boot and Wall are the clocks, CLOCK_BOOTTIME and the wall clock; nil
	// means the system's. Tests inject their own.
	Boot func() time.Duration
	Wall func() time.Time
}

// Writer appends events to a record as they happen, one JSON line each, each
// flushed before its method returns. It is safe for concurrent use by
// multiple goroutines. After the first write error every method returns it.
type Writer struct {
	mu   sync.Mutex
	w    *bufio.Writer
	c    io.Closer
	opts Options
	// bootAt is the wall time at boot: an event's wall time is bootAt plus
	// its boot time, so both clocks agree within one record.
	bootAt time.Time
	err    error
}

// Create creates (or truncates) the file at path with mode 0600 and returns a
// Writer on it that has written h. Close the Writer to close the file.
func Create(path string, h Header, opts *Options) (*Writer, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create record: %w", err)
	}
	// An existing file keeps its mode through O_TRUNC: a record may hold
	// secrets, so make it private whatever it was.
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, fmt.Errorf("create record: %w", err)
	}
	w, err := NewWriter(f, h, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.c = f
	return w, nil
}

// NewFileWriter is [NewWriter] on f, an open file (made private by its
// opener, see internal/userfile); Close closes f, also on error here.
func NewFileWriter(f io.WriteCloser, h Header, opts *Options) (*Writer, error) {
	w, err := NewWriter(f, h, opts)
	if err != nil {
		f.Close()
		return nil, err
	}
	w.c = f
	return w, nil
}

// NewWriter writes h as the first line to out and returns a Writer that
// appends to it. Schema and Version are filled in; Started and Boot too when
// zero.
func NewWriter(out io.Writer, h Header, opts *Options) (*Writer, error) {
	w := &Writer{w: bufio.NewWriter(out)}
	if opts != nil {
		w.opts = *opts
	}
	if w.opts.Boot == nil {
		w.opts.Boot = proc.BootTime
	}
	if w.opts.Wall == nil {
		w.opts.Wall = time.Now
	}
	boot, wall := w.opts.Boot(), w.opts.Wall()
	w.bootAt = wall.Add(-boot)
	h.Schema, h.Version = SchemaName, SchemaVersion
	if h.Started.IsZero() {
		h.Started, h.Boot = wall, boot
	}
	h.Command = w.redact(h.Command)
	if err := w.write(h); err != nil {
		return nil, err
	}
	return w, nil
}

// Event records a tracker event (fork, exec or exit). Other kinds are
// ignored.
func (w *Writer) Event(ev lineage.Event) error {
	out, ok := fromLineage(ev)
	if !ok {
		return nil
	}
	out.Wall = w.wall(out.Boot)
	if out.Argv != nil {
		out.Argv, out.Redacted = w.redactArgv(out.Argv)
	}
	return w.write(out)
}

// Leak records that m was alive when its root ended; reason says how the
// job ended ("root exited", "deadline").
func (w *Writer) Leak(m lineage.Member, reason string) error {
	ev := fromMember(KindLeak, m)
	ev.Reason = reason
	return w.now(ev)
}

// Keep records that m was spared on purpose, and why.
func (w *Writer) Keep(m lineage.Member, reason string) error {
	ev := fromMember(KindKeep, m)
	ev.Reason = reason
	return w.now(ev)
}

// Unkeep records that a keep that spared m ended (reason names it): from
// then on, m is reaped like any other member.
func (w *Writer) Unkeep(m lineage.Member, reason string) error {
	ev := fromMember(KindUnkeep, m)
	ev.Reason = reason
	return w.now(ev)
}

// Loss records that the kernel could not deliver count events (the ring
// buffer was full): the record has a gap there. A zero count is not written.
func (w *Writer) Loss(count uint64) error { return w.LossOf(count, "") }

// LossOf records a gap of count events of the kind reason names ("events
// lost", "undecodable", ...). A zero count is not written.
func (w *Writer) LossOf(count uint64, reason string) error {
	if count == 0 {
		return nil
	}
	return w.now(Event{Kind: KindLoss, Count: count, Reason: reason})
}

// Placement is what a tracker knows of a loss beyond its count: when its
// events happened (From to To, CLOCK_BOOTTIME; zero when unknown) and whose
// they were (see [Event]'s fields of the same names).
type Placement struct {
	From, To time.Duration
	Members  []LostMember
}

// LossIn records a gap of count events of the kind reason names, placed in
// time and naming its members as far as g knows them: the first
// MaxLostMembers are named, the rest counted. A zero count is not written.
func (w *Writer) LossIn(count uint64, reason string, g Placement) error {
	if count == 0 {
		return nil
	}
	ev := Event{Kind: KindLoss, Count: count, Reason: reason, From: g.From, To: g.To, Members: g.Members}
	if n := len(ev.Members); n > MaxLostMembers {
		ev.Members, ev.MembersOmitted = ev.Members[:MaxLostMembers], n-MaxLostMembers
	}
	return w.now(ev)
}

// Reap records what the reaper did: a signal event for every signal it sent
// to a member (the last one carrying the member's result), a keep event for
// a member it kept; why says why the lineage was reaped ("deadline", "root
// exited"). All take the time of the call: the report doesn't time signals.
func (w *Writer) Reap(rep reap.Report, why string) error {
	for _, o := range rep.Outcomes {
		for _, ev := range outcomeEvents(o, why) {
			if ev.Argv != nil {
				ev.Argv, ev.Redacted = w.redactArgv(ev.Argv)
			}
			if err := w.now(ev); err != nil {
				return err
			}
		}
	}
	return nil
}

// outcomeEvents are the events that stand for one reap outcome.
func outcomeEvents(o reap.Outcome, why string) []Event {
	if o.Result == lineage.Kept {
		ev := fromMember(KindKeep, o.Member)
		ev.Reason, ev.Result = o.Reason, string(o.Result)
		return []Event{ev}
	}
	var out []Event
	for i, sig := range o.Sent {
		ev := fromMember(KindSignal, o.Member)
		ev.Signal, ev.Reason = sig, why
		if i == len(o.Sent)-1 {
			ev.Result, ev.Argv = string(o.Result), o.Argv
			if o.Reason != "" {
				ev.Reason = why + ": " + o.Reason
			}
		}
		out = append(out, ev)
	}
	return out
}

// Close flushes the record and closes the file if the Writer opened it.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.err
	if w.c != nil {
		if cerr := w.c.Close(); err == nil {
			err = cerr
		}
		w.c = nil
	}
	if w.err == nil {
		w.err = os.ErrClosed
	}
	return err
}

// now stamps ev with the current time on both clocks and writes it.
func (w *Writer) now(ev Event) error {
	ev.Boot = w.opts.Boot()
	ev.Wall = w.wall(ev.Boot)
	return w.write(ev)
}

func (w *Writer) wall(boot time.Duration) time.Time { return w.bootAt.Add(boot).UTC() }

// write encodes v outside the lock, then appends and flushes it under it.
// Events are encoded by hand (encode.go), the rest by encoding/json.
func (w *Writer) write(v any) error {
	var line []byte
	ok := false
	if ev, isEvent := v.(Event); isEvent {
		line, ok = appendEvent(make([]byte, 0, 256), &ev)
	}
	if !ok {
		var err error
		if line, err = json.Marshal(v); err != nil {
			return fmt.Errorf("record: %w", err)
		}
	}
	line = append(line, '\n')
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return w.err
	}
	if _, err := w.w.Write(line); err != nil {
		w.err = fmt.Errorf("write record: %w", err)
		return w.err
	}
	if err := w.w.Flush(); err != nil {
		w.err = fmt.Errorf("write record: %w", err)
	}
	return w.err
}
