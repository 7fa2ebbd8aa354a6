package server

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

func isEnded(sub *subscriber) bool {
	select {
	case <-sub.ended:
		return true
	default:
		return false
	}
}

// A session's close ends the streams that follow it and no other; a
// stream that subscribed after the close ends at once.
func TestSessionCloseEndsItsStreamsOnly(t *testing.T) {
	s := &Server{hub: newHub()}
	a, b := &session{id: "a"}, &session{id: "b"}
	subA, subB, all := s.hub.subscribe("a"), s.hub.subscribe("b"), s.hub.subscribe("")
	s.follow(subA, a)
	s.follow(subB, b)
	s.hub.endSession(a)
	s.hub.endSession(a) // twice: no panic
	if !isEnded(subA) || isEnded(subB) || isEnded(all) {
		t.Errorf("after a's close: a ended %v, b ended %v, unfiltered ended %v; want true, false, false", isEnded(subA), isEnded(subB), isEnded(all))
	}
	late := s.hub.subscribe("a")
	a.closed = true
	s.follow(late, a)
	if !isEnded(late) {
		t.Error("a stream that follows a closed session did not end")
	}
}

// readStream reads a stream's events into a channel, closed at its end.
func readStream(t *testing.T, l *liveServer, ctx context.Context, path string) <-chan record.Event {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://lineage"+path, nil)
	resp, err := l.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d", path, resp.StatusCode)
	}
	out := make(chan record.Event, 256)
	go func() {
		defer close(out)
		defer resp.Body.Close()
		sc := bufio.NewScanner(resp.Body)
		sc.Scan() // the header
		for sc.Scan() {
			var ev record.Event
			if json.Unmarshal(sc.Bytes(), &ev) == nil {
				out <- ev
			}
		}
	}()
	return out
}

// Through a live server: a stream filtered to a session gets the exits
// its close caused, then an end event, then its end; an unfiltered stream
// goes on and sees the next session's close.
func TestStreamOfAClosedSessionEnds(t *testing.T) {
	l := startLiveServer(t)
	start := func(session string) lineage.Identity {
		c := exec.Command("sleep", testutil.Sleep(l.mark))
		c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
		l.procs = append(l.procs, c)
		id := lineage.Identity{PID: uint32(c.Process.Pid), StartTicks: startTicks(c.Process.Pid)}
		l.do("POST", "/v1/roots", api.AddRoot{PID: int64(id.PID), Start: id.StartTicks, Session: session, Kind: "autonomous"}, nil)
		return id
	}
	first, second := start("first"), start("second")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mine := readStream(t, l, ctx, "/v1/events?session=first")
	all := readStream(t, l, ctx, "/v1/events")
	l.do("POST", "/v1/sessions/first/close", nil, nil)
	var kinds []record.Kind
	exited := false
	for ev := range mine {
		kinds = append(kinds, ev.Kind)
		if ev.Kind == record.KindExit && ev.Process == first {
			exited = true
		}
		if ev.Kind == record.KindEnd {
			if !exited {
				t.Errorf("the end came before the exit of the session's root: %v", kinds)
			}
			if ev.Reason != "session first closed" {
				t.Errorf("end reason %q", ev.Reason)
			}
		}
	}
	if len(kinds) == 0 || kinds[len(kinds)-1] != record.KindEnd {
		t.Fatalf("the stream's events %v don't end with an end event", kinds)
	}
	l.do("POST", "/v1/sessions/second/close", nil, nil)
	for ev := range all {
		if ev.Kind == record.KindEnd {
			t.Fatalf("the unfiltered stream ended: %+v", ev)
		}
		if ev.Kind == record.KindExit && ev.Process == second {
			return // it went on past the first close
		}
	}
	t.Fatal("the unfiltered stream ended without the second session's exit")
}
