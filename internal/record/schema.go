package record

import (
	"time"

	"github.com/lineage-dev/lineage/internal/buildinfo"
	"github.com/lineage-dev/lineage/lineage"
)

// SchemaName names the schema in every record's header.
const SchemaName = "lineage-record"

// SchemaVersion is the version of the schema this package writes and reads.
// A new field that readers may ignore keeps the version; a change of meaning
// raises it. A reader given a newer version reads the fields it knows.
const SchemaVersion = 2

// Kind says what an [Event] records.
type Kind string

// The event kinds. fork, exec and exit come from the tracker; signal, keep,
// unkeep and leak from the job's end and its reap; loss from the tracker's
// counters; end closes a sidecar's event stream filtered to a session that
// closed. Version 2 added unkeep.
const (
	KindFork   Kind = "fork"
	KindExec   Kind = "exec"
	KindExit   Kind = "exit"
	KindSignal Kind = "signal"
	KindKeep   Kind = "keep"
	KindUnkeep Kind = "unkeep"
	KindLeak   Kind = "leak"
	KindLoss   Kind = "loss"
	KindEnd    Kind = "end"
)

// Known reports whether k is a kind this version of the schema defines.
func (k Kind) Known() bool {
	switch k {
	case KindFork, KindExec, KindExit, KindSignal, KindKeep, KindUnkeep, KindLeak, KindLoss, KindEnd:
		return true
	}
	return false
}

// Header is the first line of a record.
type Header struct {
	// Schema is SchemaName; Version the schema version.
	Schema  string `json:"schema"`
	Version int    `json:"version"`
	// Lineage is the version of lineage that wrote the record.
	Lineage string `json:"lineage"`
	// Build is the rest of what the writing binary says about itself:
	// commit, Go release, BPF objects' digest. Absent in older records.
	Build *buildinfo.Info `json:"build,omitempty"`
	// Host is the machine's host name; Kernel its kernel release.
	Host   string `json:"host"`
	Kernel string `json:"kernel"`
	// Started is when recording began, on the wall clock and (Boot, in
	// nanoseconds) on CLOCK_BOOTTIME, so that boot times can be placed.
	Started time.Time     `json:"started"`
	Boot    time.Duration `json:"boot_ns"`
	// Command is the job's command line, when one job is recorded.
	Command []string `json:"command,omitempty"`
	// Backend is the tracker's backend ("bpf", "proc"); Limits say what
	// it cannot see, so that a reader knows what the record may lack (the
	// proc backend misses processes that lived and died between two scans).
	Backend string   `json:"backend,omitempty"`
	Limits  []string `json:"limits,omitempty"`
	// Session names the sidecar session a record is of (`lineage serve
	// --record-dir`).
	Session string `json:"session,omitempty"`
}

// Event is one line of a record after the header. Fields that don't apply
// to an event's kind are left out.
type Event struct {
	Kind Kind `json:"kind"`
	// Boot is when it happened, in nanoseconds of CLOCK_BOOTTIME; Wall is
	// the same instant on the wall clock.
	Boot time.Duration `json:"boot_ns"`
	Wall time.Time     `json:"wall"`
	// Process is who the event is about; Parent its lineage parent; Root
	// the root of its lineage. All zero for a loss.
	Process lineage.Identity `json:"process"`
	Parent  lineage.Identity `json:"parent"`
	Root    lineage.Identity `json:"root"`
	// Comm is the kernel's short command name.
	Comm string `json:"comm,omitempty"`
	// IsRoot marks the fork that started a root.
	IsRoot bool `json:"is_root,omitempty"`
	// Untracked marks a fork whose child could not be tracked (the
	// membership was full): it escaped. Contained marks a child killed at
	// birth because its lineage was being reaped.
	Untracked bool `json:"untracked,omitempty"`
	Contained bool `json:"contained,omitempty"`

	// Exe is the executed path and Argv the new program's arguments
	// (exec). ArgvTruncated is set when the tracker had to cut argv;
	// Redacted when words were masked. UID and EUID are set when known.
	Exe           string   `json:"exe,omitempty"`
	Argv          []string `json:"argv,omitempty"`
	ArgvTruncated bool     `json:"argv_truncated,omitempty"`
	Redacted      bool     `json:"redacted,omitempty"`
	UID           *uint32  `json:"uid,omitempty"`
	EUID          *uint32  `json:"euid,omitempty"`

	// Exit is how the process ended (exit), when known.
	Exit *Exit `json:"exit,omitempty"`

	// Signal is the signal the reaper sent ("TERM", "KILL"; signal);
	// Reason says why it was sent, kept or reported (signal, keep, leak);
	// Result is how the reaper's work on the process ended ("terminated",
	// "killed", "survived", ...; signal, keep).
	Signal string `json:"signal,omitempty"`
	Reason string `json:"reason,omitempty"`
	Result string `json:"result,omitempty"`

	// Count is how many events the kernel could not deliver (loss); the
	// loss's Reason says which counter it is.
	Count uint64 `json:"count,omitempty"`
	// From and To place a loss in time, when the tracker knows (loss,
	// optional, version 2): every event it counts happened at or after
	// From and at or before To, on CLOCK_BOOTTIME like Boot. A loss without
	// both, or with To before From, is not placed.
	From time.Duration `json:"from_ns,omitempty"`
	To   time.Duration `json:"to_ns,omitempty"`
	// Members name the processes whose events the loss counts, where the
	// tracker knows them (loss, optional, version 2): at most MaxLostMembers;
	// MembersOmitted counts those it knew but did not name.
	Members        []LostMember `json:"members,omitempty"`
	MembersOmitted int          `json:"members_omitted,omitempty"`
}

// MaxLostMembers is the most members one loss event names, so that its
// line stays well under a Reader's MaxLine.
const MaxLostMembers = 4096

// LostMember is a process whose events a loss counts: Kinds says which of
// them (fork, exec, exit), when the tracker knows; empty, some of them.
type LostMember struct {
	Process lineage.Identity `json:"process"`
	Kinds   []Kind           `json:"kinds,omitempty"`
}

// Placed reports whether a loss says when its events happened.
func (ev *Event) Placed() bool { return ev.From > 0 && ev.To >= ev.From }

// Exit is how a process ended: Code when it called exit(2), Signal when a
// signal killed it; Core when it dumped core.
type Exit struct {
	Code   *int   `json:"code,omitempty"`
	Signal string `json:"signal,omitempty"`
	Core   bool   `json:"core,omitempty"`
}

// String reads like "exit 0" or "signal KILL".
func (e *Exit) String() string {
	switch {
	case e == nil:
		return "unknown"
	case e.Code != nil:
		return "exit " + itoa(*e.Code)
	case e.Signal != "":
		return "signal " + e.Signal
	}
	return "unknown"
}
