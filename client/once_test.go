package client

import (
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/lineage-dev/lineage/api"
)

// serveUnix answers HTTP on a Unix socket in a temporary directory with h,
// until the test ends, and returns the socket's path.
func serveUnix(t *testing.T, h http.HandlerFunc) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h}
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close(); <-done })
	return sock
}

// Once answers as Do does: the decoded answer, an APIError for an error
// answer, ErrNoDaemon with no daemon.
func TestOnceAnswersAsDo(t *testing.T) {
	type pair struct{ A, B string }
	sock := serveUnix(t, func(w http.ResponseWriter, r *http.Request) {
		var in pair
		body, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(body, &in); err != nil || r.Header.Get("Content-Type") != "application/json" {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "bad body " + string(body), Code: "invalid"})
			return
		}
		if r.URL.Path != "/v1/swap" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "no " + r.URL.Path, Code: "not_found"})
			return
		}
		_ = json.NewEncoder(w).Encode(pair{A: in.B, B: in.A})
	})
	var out pair
	if err := Once(sock, "POST", "/v1/swap", pair{A: "a", B: "b"}, &out); err != nil || out != (pair{A: "b", B: "a"}) {
		t.Errorf("swap: %+v, %v", out, err)
	}
	var ae *APIError
	if err := Once(sock, "POST", "/v1/other", pair{}, &out); !errors.As(err, &ae) || ae.Status != http.StatusNotFound || ae.Body.Code != "not_found" {
		t.Errorf("error answer: %v, want an APIError 404 not_found", err)
	}
	if err := Once(sock, "POST", "/v1/swap", nil, nil); !errors.As(err, &ae) || ae.Status != http.StatusBadRequest {
		t.Errorf("no body: %v, want an APIError 400", err)
	}
	if err := Once(filepath.Join(t.TempDir(), "none.sock"), "POST", "/v1/swap", pair{}, &out); !errors.Is(err, ErrNoDaemon) {
		t.Errorf("no daemon: %v, want ErrNoDaemon", err)
	}
}
