package client

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
)

// Each id is one segment of its endpoint's path, whatever it holds: served
// by a mux of the daemon's patterns, which cleans "." and ".." away and
// redirects, every call reaches its own endpoint with the id as given. An
// empty id is refused, and nothing is sent.
func TestIDsAreOnePathSegment(t *testing.T) {
	type hit struct{ pattern, id string }
	var mu sync.Mutex
	var hits []hit
	record := func(h hit) {
		mu.Lock()
		defer mu.Unlock()
		hits = append(hits, h)
	}
	taken := func() []hit {
		mu.Lock()
		defer mu.Unlock()
		got := hits
		hits = nil
		return got
	}
	mux := http.NewServeMux()
	for _, p := range []string{
		"GET /v1/sessions/{id}", "POST /v1/sessions/{id}/turn-end", "POST /v1/sessions/{id}/close",
		"GET /v1/sessions/{id}/report", "DELETE /v1/keeps/{id}", "GET /v1/why/{id}",
	} {
		mux.HandleFunc(p, func(w http.ResponseWriter, r *http.Request) {
			record(hit{r.Pattern, r.PathValue("id")})
			w.Write([]byte("{}"))
		})
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		record(hit{"no endpoint", r.URL.Path})
		w.Write([]byte("{}"))
	})
	c := New(serveUnix(t, mux.ServeHTTP))
	ctx := context.Background()
	calls := []struct {
		pattern string
		call    func(id string) error
	}{
		{"GET /v1/sessions/{id}", func(id string) error { _, err := c.Session(ctx, id); return err }},
		{"POST /v1/sessions/{id}/turn-end", func(id string) error { _, err := c.TurnEnd(ctx, id); return err }},
		{"POST /v1/sessions/{id}/close", func(id string) error { _, err := c.CloseSession(ctx, id); return err }},
		{"GET /v1/sessions/{id}/report", func(id string) error { _, err := c.ReportSession(ctx, id); return err }},
		{"DELETE /v1/keeps/{id}", func(id string) error { _, err := c.RemoveKeep(ctx, id); return err }},
		{"GET /v1/why/{id}", func(id string) error { _, err := c.Why(ctx, id); return err }},
	}
	for _, call := range calls {
		for _, id := range []string{"s1", ".", "..", "...", "a/..", "../close", "a b", "?x=1", "#", "%2E", "turn-end"} {
			if err := call.call(id); err != nil {
				t.Errorf("%s with %q: %v", call.pattern, id, err)
			}
			if got, want := taken(), (hit{call.pattern, id}); len(got) != 1 || got[0] != want {
				t.Errorf("%s with %q reached %v, want %v", call.pattern, id, got, want)
			}
		}
		if err := call.call(""); !errors.Is(err, errEmptyID) {
			t.Errorf("%s with an empty id: %v, want errEmptyID", call.pattern, err)
		}
		if got := taken(); len(got) != 0 {
			t.Errorf("%s with an empty id reached %v, want nothing sent", call.pattern, got)
		}
	}
}
