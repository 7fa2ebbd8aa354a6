package server

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/record"
)

func TestClassify(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
	}{
		{fmt.Errorf("x: %w", lineage.ErrInvalid), http.StatusBadRequest},
		{fmt.Errorf("x: %w", lineage.ErrNoProcess), http.StatusNotFound},
		{fmt.Errorf("x: %w", lineage.ErrIdentityMismatch), http.StatusNotFound},
		{fmt.Errorf("x: %w", loader.ErrAlreadyTracked), http.StatusConflict},
		{fmt.Errorf("wrapped: %w", forbidden("no")), http.StatusForbidden},
		{errors.New("boom"), http.StatusInternalServerError},
	} {
		if got, _ := classify(c.err); got != c.status {
			t.Errorf("%v: %d, want %d", c.err, got, c.status)
		}
	}
}

// A stream filtered by session gets its roots' events and its own
// decisions, not others'; a full stream loses items without blocking.
func TestHubFiltersAndNeverBlocks(t *testing.T) {
	h := newHub()
	mine, theirs := lineage.Identity{PID: 10, StartTicks: 1}, lineage.Identity{PID: 20, StartTicks: 1}
	h.sessionOf = func(id lineage.Identity) string {
		if id == mine {
			return "a"
		}
		return "b"
	}
	sub := h.subscribe("a")
	h.event(lineage.Event{Kind: lineage.EventFork, Process: lineage.Identity{PID: 11, StartTicks: 2}, Root: mine})
	h.event(lineage.Event{Kind: lineage.EventFork, Process: lineage.Identity{PID: 21, StartTicks: 2}, Root: theirs})
	h.kept("b", lineage.Member{Identity: theirs}, "keep")
	h.kept("a", lineage.Member{Identity: mine}, "keep")
	if n := len(sub.ch); n != 2 {
		t.Fatalf("%d items for session a, want 2", n)
	}
	var buf bytes.Buffer
	w, err := record.NewWriter(&buf, record.Header{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := (<-sub.ch).write(w); err != nil {
			t.Fatal(err)
		}
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], `"kind":"fork"`) || !strings.Contains(lines[2], `"kind":"keep"`) {
		t.Errorf("stream:\n%s", buf.String())
	}
	for range cap(sub.ch) + 5 {
		h.kept("a", lineage.Member{Identity: mine}, "keep")
	}
	if lost := h.takeLost(sub); lost != 5 {
		t.Errorf("lost %d, want 5", lost)
	}
	h.close()
	if _, ok := <-sub.ch; !ok {
		t.Error("the stream's buffered items were dropped at close")
	}
	h.unsubscribe(sub) // after close: nothing to do, no panic
}

// A kind the API refuses (checkKind) can still come from a state an older
// daemon wrote: it counts as interactive, never auto-killed.
func TestParseKind(t *testing.T) {
	for in, want := range map[string]string{"autonomous": "autonomous", "interactive": "interactive", "": "interactive", "Autonomous": "interactive", "x": "interactive"} {
		if got := parseKind(in).String(); got != want {
			t.Errorf("%q: %s, want %s", in, got, want)
		}
	}
}
