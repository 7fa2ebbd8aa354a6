package record

import (
	"encoding/json"
	"strings"
)

// decode reads one event line, or keeps a Problem saying why it can't. The
// fast decoder reads the lines lineage writes; encoding/json the others.
func (r *Reader) decode(raw []byte, cut bool) (Event, bool) {
	ev, ok := decodeFast(raw)
	if !ok {
		ev = Event{}
		err := json.Unmarshal(raw, &ev)
		if err != nil {
			r.badLine(err, cut)
			return Event{}, false
		}
	}
	return r.check(ev)
}

// badLine keeps the problem with a line encoding/json could not read.
func (r *Reader) badLine(err error, cut bool) {
	if cut {
		r.problem(r.line, "cut short (the record ends mid-line): the event on it is lost")
		return
	}
	r.problem(r.line, "not an event (%s): skipped", shortError(err))
}

// check keeps the events of kinds this version knows, that name a process.
func (r *Reader) check(ev Event) (Event, bool) {
	if !ev.Kind.Known() {
		r.problem(r.line, "unknown event kind %q (a newer schema?): skipped", ev.Kind)
		return Event{}, false
	}
	if ev.Kind != KindLoss && ev.Kind != KindEnd && ev.Process.IsZero() {
		r.problem(r.line, "%s event names no process: skipped", ev.Kind)
		return Event{}, false
	}
	return ev, true
}

// shortError trims encoding/json's message to what a reader needs.
func shortError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "json: ")
	if len(s) > 120 {
		s = s[:120] + "…"
	}
	return s
}
