package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

// FakePID is the first of the fake pids. They start above PID_MAX_LIMIT
// (4194304 on 64-bit kernels), so no real process can ever have one: a
// fake entry that reaches the kernel (the BPF backend's maps) names
// nothing.
const FakePID = 4194400

// FakeProc is a /proc tree in a temporary directory: each process is a
// directory with a stat and a cmdline, written in the kernel's format.
type FakeProc struct {
	tb testing.TB
	// Root is the tree's directory, the root to open a /proc reader at.
	Root string
}

// NewFakeProc returns an empty tree in a directory of the test's own.
func NewFakeProc(tb testing.TB) *FakeProc {
	tb.Helper()
	return &FakeProc{tb: tb, Root: tb.TempDir()}
}

// FakeProcess is one process of a fake tree.
type FakeProcess struct {
	PID, PPID, PGRP, Session int
	Comm, State              string
	// Start is the start time in clock ticks; Stack the start of the
	// stack (field 28), which tells a fork from an exec.
	Start, Stack uint64
	// Exit is the exit code of a zombie (field 52).
	Exit int
	Argv []string
}

// Set writes p into the tree, replacing what its pid had.
func (f *FakeProc) Set(p FakeProcess) {
	f.tb.Helper()
	if p.State == "" {
		p.State = "S"
	}
	if p.PGRP == 0 {
		p.PGRP = p.PID
	}
	if p.Session == 0 {
		p.Session = p.PGRP
	}
	if p.Comm == "" {
		p.Comm = "sleep"
	}
	if p.Stack == 0 && p.State != "Z" {
		p.Stack = 0x7ffc00000000 + p.Start
	}
	fields := make([]string, 53)
	for i := range fields {
		fields[i] = "0"
	}
	fields[1], fields[2], fields[3] = fmt.Sprint(p.PID), "("+p.Comm+")", p.State
	fields[4], fields[5], fields[6] = fmt.Sprint(p.PPID), fmt.Sprint(p.PGRP), fmt.Sprint(p.Session)
	fields[8], fields[9] = "-1", "4194304"
	fields[18], fields[20] = "20", "1"
	fields[22], fields[28], fields[52] = fmt.Sprint(p.Start), fmt.Sprint(p.Stack), fmt.Sprint(p.Exit)
	dir := filepath.Join(f.Root, fmt.Sprint(p.PID))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.tb.Fatal(err)
	}
	stat := strings.Join(fields[1:], " ") + "\n"
	cmdline := ""
	if p.State != "Z" {
		argv := p.Argv
		if argv == nil {
			argv = []string{p.Comm}
		}
		cmdline = strings.Join(argv, "\x00") + "\x00"
	}
	for name, content := range map[string]string{"stat": stat, "cmdline": cmdline} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			f.tb.Fatal(err)
		}
	}
}

// Remove takes pid out of the tree, as if it had been reaped.
func (f *FakeProc) Remove(pid int) {
	f.tb.Helper()
	if err := os.RemoveAll(filepath.Join(f.Root, fmt.Sprint(pid))); err != nil {
		f.tb.Fatal(err)
	}
}

// Supervisor puts this test process in the fake tree, as the supervisor the
// proc backend finds itself to be.
func (f *FakeProc) Supervisor() FakeProcess {
	p := FakeProcess{PID: os.Getpid(), PPID: 1, Comm: "lineage", Start: 50, Session: 7}
	f.Set(p)
	return p
}

// ID is p's identity.
func (f *FakeProc) ID(p FakeProcess) lineage.Identity {
	return lineage.Identity{PID: uint32(p.PID), StartTicks: p.Start}
}

// Stat is p as lineage parses it.
func (f *FakeProc) Stat(p FakeProcess) lineage.Stat {
	return lineage.Stat{Identity: f.ID(p), PPID: p.PPID, PGRP: p.PGRP, Session: p.Session, State: "S", Comm: p.Comm}
}

// MemberIDs lists the identities of root's members.
func MemberIDs(tb testing.TB, b interface {
	Members(lineage.Identity) ([]lineage.Member, error)
}, root lineage.Identity) []lineage.Identity {
	tb.Helper()
	ms, err := b.Members(root)
	if err != nil {
		tb.Fatalf("members of %s: %v", root, err)
	}
	var ids []lineage.Identity
	for _, m := range ms {
		ids = append(ids, m.Identity)
	}
	return ids
}

// SameIDs reports whether got and want hold the same identities, in any
// order.
func SameIDs(got []lineage.Identity, want ...lineage.Identity) bool {
	g, w := slices.Clone(got), slices.Clone(want)
	less := func(a, b lineage.Identity) int { return int(a.PID) - int(b.PID) }
	slices.SortFunc(g, less)
	slices.SortFunc(w, less)
	return slices.Equal(g, w)
}
