package server

import (
	"errors"
	"github.com/lineage-dev/lineage/api"
	"net/http"
	"strings"
	"testing"
)

// A quota counts what is open at once, per uid: past it, 429 too_many
// naming the limit and its flag, counted once; what is given back makes
// room again; root is counted, never refused; zero is no limit.
func TestUsageCountsWhatIsOpen(t *testing.T) {
	var refused []limit
	u := newUsage(Quotas{Sessions: 2, Keeps: 3}, func(l limit) { refused = append(refused, l) })
	for range 2 {
		if err := u.take(1000, limitSessions, 1); err != nil {
			t.Fatal(err)
		}
	}
	err := u.take(1000, limitSessions, 1)
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != http.StatusTooManyRequests || ae.code != api.CodeTooMany ||
		!strings.Contains(err.Error(), "the limit is 2") || !strings.Contains(err.Error(), "--max-sessions") {
		t.Errorf("past the quota: %v, want 429 too_many naming the limit", err)
	}
	if len(refused) != 1 || refused[0] != limitSessions {
		t.Errorf("refusals counted %v, want one of sessions", refused)
	}
	if err := u.take(1001, limitSessions, 1); err != nil {
		t.Errorf("another uid: %v", err)
	}
	u.give(1000, limitSessions, 1)
	if err := u.take(1000, limitSessions, 1); err != nil {
		t.Errorf("after one was closed: %v", err)
	}
	if err := u.take(1000, limitKeeps, 4); err == nil {
		t.Error("four keeps at once past a quota of three were taken")
	}
	for range 10 {
		if err := u.take(0, limitSessions, 1); err != nil {
			t.Fatalf("root: %v", err)
		}
	}
	if err := u.take(1000, limitStreams, 100); err != nil {
		t.Errorf("no quota of streams: %v", err)
	}
	if got := u.count(1000, limitSessions, false); got != 2 {
		t.Errorf("uid 1000 holds %d sessions, want 2", got)
	}
	if got := u.count(0, limitSessions, true); got != 13 {
		t.Errorf("all hold %d sessions, want 13", got)
	}
	u.give(1001, limitSessions, 5) // more than it holds: none left, no underflow
	if got := u.count(1001, limitSessions, false); got != 0 {
		t.Errorf("uid 1001 holds %d, want 0", got)
	}
}

// A record's name gives its session's uid; an earlier daemon's, with none,
// counts as root's; anything else is not a record.
func TestRecordUID(t *testing.T) {
	for name, want := range map[string]struct {
		uid uint32
		ok  bool
	}{
		"20260101T000000.000000000Z-u65534-build-43.jsonl": {65534, true},
		"20260101T000000.000000000Z-u0-u5-x.jsonl":         {0, true},
		"20260101T000000.000000000Z-build-43.jsonl":        {0, true},
		"notes.txt": {0, false},
	} {
		uid, ok := recordUID(name)
		if uid != want.uid || ok != want.ok {
			t.Errorf("%s: uid %d %v, want %d %v", name, uid, ok, want.uid, want.ok)
		}
	}
}
