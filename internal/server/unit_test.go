package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
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

// An answer is compact JSON for a program, indented for curl, wget and a
// request with ?pretty; all parse the same.
func TestAnswersIndentedForAReader(t *testing.T) {
	h := methods{http.MethodGet: func(*http.Request, Peer) (int, any, error) {
		return http.StatusOK, map[string]any{"api": 1, "sessions": []string{"a"}}, nil
	}}
	for _, c := range []struct {
		target, agent string
		indented      bool
	}{
		{"/v1/status", "Go-http-client/1.1", false},
		{"/v1/status", "", false},
		{"/v1/status", "curl/8.14.1", true},
		{"/v1/status", "Wget/1.25.0", true},
		{"/v1/status?pretty", "Go-http-client/1.1", true},
		{"/v1/status?pretty=1", "", true},
	} {
		r := httptest.NewRequest(http.MethodGet, c.target, nil)
		r.Header.Set("User-Agent", c.agent)
		r = r.WithContext(context.WithValue(r.Context(), peerKey{}, Peer{}))
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		body := w.Body.String()
		if got := strings.Contains(body, "\n  "); got != c.indented {
			t.Errorf("%s from %q: indented %v, want %v:\n%s", c.target, c.agent, got, c.indented, body)
		}
		var v struct {
			API      int      `json:"api"`
			Sessions []string `json:"sessions"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil || v.API != 1 || len(v.Sessions) != 1 {
			t.Errorf("%s from %q: %+v, %v", c.target, c.agent, v, err)
		}
	}
}
