package tracker

import (
	"fmt"
	"io"
	"regexp"
	"sync"

	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/reap"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// RecordSpec asks for a job's forensic record (docs/record.md). The zero
// value asks for none.
type RecordSpec struct {
	// File receives the record. Open it before the job starts (see
	// internal/userfile: private, the invoking user's); the job closes it.
	File io.WriteCloser
	// Redact, if set, masks matching parts of argv words before they are
	// written.
	Redact *regexp.Regexp
}

// maxEarly bounds the events kept before the root is known: the few the
// backend delivers while Spawn runs (the root's fork, its first exec, a
// Go runtime probe's fork and exit).
const maxEarly = 4096

// recorder writes one job's events to its record: only those of its root's
// lineage. Events that come before the root is known wait in early.
type recorder struct {
	w *record.Writer

	mu    sync.Mutex
	root  lineage.Identity
	early []lineage.Event
	// dropped counts events that came before the root was known and did
	// not fit in early: written as a loss, since some may be the job's.
	dropped uint64
	// gaps is where the backend's lost events stood when the record
	// began, for a backend that places them (placed).
	gaps   loader.GapMark
	placed bool
}

// startRecord writes the record's header, with the backend and what it
// can't see, and from then on hands the tracker's events to the record.
// It returns nil when spec asks for no record. The tracker holds one
// recorded job at a time (lineage run's).
func (t *Tracker) startRecord(spec RecordSpec, command []string) (*recorder, error) {
	if spec.File == nil {
		return nil, nil
	}
	w, err := record.NewFileWriter(spec.File, t.RecordHeader(command), &record.Options{Redact: spec.Redact})
	if err != nil {
		return nil, fmt.Errorf("record: %w", err)
	}
	r := &recorder{w: w}
	r.gaps, r.placed = t.GapMark()
	t.recorder.Store(r)
	return r, nil
}

// RecordHeader is the header of a record of this tracker's events: the
// host's, the backend's name and what that backend can't see.
func (t *Tracker) RecordHeader(command []string) record.Header {
	h := record.HostHeader(command)
	h.Backend = t.choice.Backend
	h.Limits = backendLimits(t.choice.Backend)
	return h
}

// backendLimits says what a backend can't see, for the record's header.
func backendLimits(backend string) []string {
	if backend == loader.BackendProc {
		return []string{"proc backend: a process that lived and died between two scans is not in the record; exec argv is read from /proc when a scan sees the process, so a process that execs again in between shows only its last program"}
	}
	return nil
}

// event writes ev if it belongs to the recorded root's lineage, or keeps it
// until the root is known.
func (r *recorder) event(ev lineage.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.root.IsZero() {
		if len(r.early) < maxEarly {
			r.early = append(r.early, ev)
		} else {
			r.dropped++
		}
		return
	}
	if ev.Root == r.root {
		_ = r.w.Event(ev) // the first error is kept and reported at the end
	}
}

// rooted names the recorded root, once Spawn has returned it, and writes
// the events of its lineage that came before.
func (r *recorder) rooted(root lineage.Identity) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.root = root
	for _, ev := range r.early {
		if ev.Root == root {
			_ = r.w.Event(ev)
		}
	}
	r.early = nil
	_ = r.w.LossOf(r.dropped, "early: events before the job's root was known, over the buffer")
}

// leaks records every member but the root alive when the job's wait ended.
func (r *recorder) leaks(j *Job, end job.End) {
	if r == nil {
		return
	}
	ms, err := j.t.backend.Members(j.root)
	if err != nil {
		j.rep.Warnings = append(j.rep.Warnings, "record leaks: "+err.Error())
	}
	for _, m := range ms {
		if m.Identity != j.root {
			_ = r.w.Leak(withTree(m, j.t.tree), endReason(end))
		}
	}
}

// kept records that a keep rule keeps m, and why, if m is of the
// recorded lineage.
func (r *recorder) kept(m lineage.Member, reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if m.Root == r.root {
		_ = r.w.Keep(m, reason)
	}
}

// withTree fills what the backend's member lacks from the event tree.
func withTree(m lineage.Member, tree *lineage.Tree) lineage.Member {
	known, ok := tree.Get(m.Identity)
	if !ok {
		return m
	}
	if m.Comm == "" {
		m.Comm = known.Comm
	}
	if m.Parent.IsZero() {
		m.Parent = known.Parent
	}
	return m
}

// reaped records what the reaper did, when it was asked to.
func (r *recorder) reaped(rep *reap.Report, end job.End) {
	if r == nil || rep == nil {
		return
	}
	_ = r.w.Reap(*rep, endReason(end))
}

// finish records the backend's losses after the events are drained, stops
// recording, closes the record and puts any write error in the report.
// The lost events it names are those of the job's lineage.
func (r *recorder) finish(t *Tracker, rep *job.Report) {
	if r == nil {
		return
	}
	t.recorder.Store(nil)
	if st, err := t.backend.Stats(); err == nil {
		l := Losses{Stats: st}
		if r.placed {
			l.Gaps, l.Placed = t.GapsSince(r.gaps)
		}
		r.mu.Lock()
		root := r.root
		r.mu.Unlock()
		l.Mine = func(ev loader.LostEvent) bool { return ev.Root == root }
		WriteLosses(r.w, l)
	}
	if err := r.w.Close(); err != nil && rep != nil {
		rep.Warnings = append(rep.Warnings, "record: "+err.Error())
	}
}

// endReason says how the job ended, for leak and signal events.
func endReason(end job.End) string {
	switch {
	case end.Deadline:
		return "deadline"
	case end.Interrupted != nil && !end.Exited:
		return "interrupted"
	}
	return "root exited"
}

// closeRecord closes a record that was opened for a job that never ran.
func closeRecord(spec RecordSpec) {
	if spec.File != nil {
		_ = spec.File.Close()
	}
}
