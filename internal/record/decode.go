package record

import (
	"encoding/json"
	"strings"
)

// decode reads one event line, or keeps a Problem saying why it can't.
func (r *Reader) decode(raw []byte, cut bool) (Event, bool) {
	var ev Event
	if err := json.Unmarshal(raw, &ev); err != nil {
		if cut {
			r.problem(r.line, "cut short (the record ends mid-line): the event on it is lost")
		} else {
			r.problem(r.line, "not an event (%s): skipped", shortError(err))
		}
		return Event{}, false
	}
	if !ev.Kind.Known() {
		r.problem(r.line, "unknown event kind %q (a newer schema?): skipped", ev.Kind)
		return Event{}, false
	}
	if ev.Kind != KindLoss && ev.Process.IsZero() {
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
