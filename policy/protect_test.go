package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

var (
	testCaller = Caller{PID: 1000, Ancestors: []int{999, 500, 1}}
	testRoot   = lineage.Identity{PID: 2000, StartTicks: 100}
)

// cand returns a live member of testRoot whose /proc stat agrees with it.
func cand(pid uint32, start uint64) Candidate {
	id := lineage.Identity{PID: pid, StartTicks: start}
	return Candidate{
		Member: lineage.Member{Identity: id, Parent: testRoot, Root: testRoot},
		Stat:   lineage.Stat{Identity: id, PPID: 1, PGRP: int(testRoot.PID), Session: int(testRoot.PID), State: "S"},
	}
}

func TestProtect(t *testing.T) {
	tests := []struct {
		name   string
		c      Candidate
		want   bool
		reason string
	}{
		{"a member", cand(2001, 150), false, ""},
		{"the root itself", func() Candidate {
			c := cand(testRoot.PID, testRoot.StartTicks)
			c.Member.Root, c.Member.Parent = lineage.Identity{}, lineage.Identity{}
			return c
		}(), false, ""},
		{"a stopped member", func() Candidate { c := cand(2001, 150); c.Stat.State = "T"; return c }(), false, ""},
		{"a zombie member", func() Candidate { c := cand(2001, 150); c.Stat.State = "Z"; return c }(), false, ""},

		{"pid 1", cand(1, 1), true, "pid 1: pid 0 and 1 are never signalled"},
		{"pid 0", cand(0, 0), true, "pid 0: pid 0 and 1 are never signalled"},
		{"lineage itself", cand(1000, 150), true, "pid 1000 is lineage itself"},
		{"lineage's parent", cand(999, 150), true, "pid 999 is an ancestor of lineage"},
		{"lineage's grandparent", cand(500, 150), true, "pid 500 is an ancestor of lineage"},
		{"no member", Candidate{Stat: cand(2001, 150).Stat}, true, "pid 0: pid 0 and 1"},
		{"a member without start time", func() Candidate { c := cand(2001, 150); c.Member.StartTicks = 0; return c }(), true, "not a member (no recorded start time)"},
		{"a member of another root", func() Candidate {
			c := cand(2001, 150)
			c.Member.Root = lineage.Identity{PID: 3000, StartTicks: 100}
			return c
		}(), true, "2001@150 is not a member of root 2000@100"},
		{"no root recorded", func() Candidate { c := cand(2001, 150); c.Member.Root = lineage.Identity{}; return c }(), true, "not a member of root"},
		{"no stat", func() Candidate { c := cand(2001, 150); c.Stat = lineage.Stat{}; return c }(), true, "2001@150: no /proc stat was read"},
		{"stat of another pid", func() Candidate { c := cand(2001, 150); c.Stat.PID = 2002; return c }(), true, "/proc stat is for pid 2002"},
		{"identity mismatch: pid reused", func() Candidate { c := cand(2001, 150); c.Stat.StartTicks = 900; return c }(), true,
			"identity mismatch: pid 2001 started at 900, the member at 150 (pid reused)"},
		{"identity mismatch: stat older", func() Candidate { c := cand(2001, 150); c.Stat.StartTicks = 149; return c }(), true, "identity mismatch"},
		{"kernel thread", func() Candidate { c := cand(2001, 150); c.Stat.Kernel = true; return c }(), true, "2001@150 is a kernel thread"},
		// Protection is by identity alone: sharing lineage's process group
		// or session protects nothing.
		{"lineage's process group is not protected", func() Candidate { c := cand(2001, 150); c.Stat.PGRP = 990; return c }(), false, ""},
		{"lineage's session is not protected", func() Candidate { c := cand(2001, 150); c.Stat.Session = 990; return c }(), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason, got := Protect(testCaller, testRoot, tt.c)
			if got != tt.want {
				t.Fatalf("Protect = %v (%q), want %v", got, reason, tt.want)
			}
			if !strings.Contains(reason, tt.reason) || (tt.want && reason == "") || (!tt.want && reason != "") {
				t.Errorf("Protect reason %q, want %q", reason, tt.reason)
			}
		})
	}
}

func TestCallerValidate(t *testing.T) {
	for _, c := range []Caller{{}, {PID: -1}} {
		if err := c.Validate(); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("%+v.Validate() = %v, want lineage.ErrInvalid", c, err)
		}
	}
	if err := (Caller{PID: 1}).Validate(); err != nil {
		t.Errorf("lineage as pid 1 of a container: %v", err)
	}
}

// A setcap install signals only what the user who ran it could signal with
// kill(2): the sender's real or effective uid is the target's real or
// saved uid.
func TestProtectBoundsCapabilitiesByTheUsersKillPermission(t *testing.T) {
	user := &KillUser{Real: 1000, Effective: 1000}
	with := func(ids *UIDs) Candidate { c := cand(2001, 150); c.UIDs = ids; return c }
	tests := []struct {
		name   string
		user   *KillUser
		c      Candidate
		want   bool
		reason string
	}{
		{"root's lineage: no user bound", nil, with(&UIDs{Real: 0, Saved: 0}), false, ""},
		{"the user's own process", user, with(&UIDs{Real: 1000, Saved: 1000}), false, ""},
		{"a setuid program the user started", user, with(&UIDs{Real: 1000, Saved: 0}), false, ""},
		{"dropped privileges to the user, saved uid kept", user, with(&UIDs{Real: 0, Saved: 1000}), false, ""},
		{"a sudo-started descendant", user, with(&UIDs{Real: 0, Saved: 0}), true, "uid 1000, who ran lineage, could not signal it"},
		{"another user's process", user, with(&UIDs{Real: 1001, Saved: 1001}), true, "runs as uid 1001"},
		{"uids unknown", user, with(nil), true, "user ids are unknown"},
		{"effective uid counts as kill(2) says", &KillUser{Real: 1000, Effective: 1001}, with(&UIDs{Real: 1001, Saved: 1001}), false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			caller := testCaller
			caller.User = tt.user
			reason, got := Protect(caller, testRoot, tt.c)
			if got != tt.want || !strings.Contains(reason, tt.reason) {
				t.Errorf("Protect = %q, %v; want %v with %q", reason, got, tt.want, tt.reason)
			}
		})
	}
	// The other protections still come first.
	c := with(&UIDs{Real: 1000, Saved: 1000})
	c.Stat.StartTicks = 999
	caller := testCaller
	caller.User = user
	if _, got := Protect(caller, testRoot, c); !got {
		t.Error("a reused pid of the user's own is not protected")
	}
}

// Root's kills have no user bound; anyone else's are bounded by that user,
// whatever capabilities it holds.
func TestInvokingUser(t *testing.T) {
	if u := InvokingUser(0, 0); u != nil {
		t.Errorf("root: %+v, want no bound", u)
	}
	if u := InvokingUser(1000, 0); u == nil || *u != (KillUser{Real: 1000, Effective: 0}) {
		t.Errorf("set-uid root run by 1000: %+v, want real 1000, effective 0", u)
	}
	if u := InvokingUser(65534, 65534); u == nil || *u != (KillUser{Real: 65534, Effective: 65534}) {
		t.Errorf("setcap install run by 65534: %+v", u)
	}
}
