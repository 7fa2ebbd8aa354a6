// Package api is the wire form of `lineage serve`'s HTTP/JSON API, version
// 1 (the /v1 of its paths): the request and response bodies, the error body
// and its codes, the default socket. The daemon answers with these types
// and package client sends and reads them; the API reference (docs/api.md)
// documents them. It imports only lineage's domain, so a client links none
// of the daemon's packages. The types are plain data, safe to share once
// built.
package api

import (
	"fmt"
	"regexp"
	"time"

	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// DefaultSocket is where the daemon listens unless told otherwise.
const DefaultSocket = "/run/lineage/lineage.sock"

// APIVersion is the version of the API, the /v1 of its paths.
const APIVersion = 1

// sessionID is the form of a session id: what a path carries unescaped.
var sessionID = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckSessionID returns nil for an id the API can carry in a path, and
// an error wrapping [lineage.ErrInvalid] otherwise. Every id the daemon
// opens a session under passes it.
func CheckSessionID(id string) error {
	if !sessionID.MatchString(id) {
		return fmt.Errorf("%w session id %q: want 1-64 of [A-Za-z0-9._-], starting with a letter or digit", lineage.ErrInvalid, id)
	}
	return nil
}

// OpenSession is the body of POST /v1/sessions.
type OpenSession struct {
	// ID names the session; empty asks the server for one.
	ID string `json:"id,omitempty"`
	// Kind is "interactive" or "autonomous"; empty counts as interactive,
	// anything else is refused (400).
	Kind  string `json:"kind,omitempty"`
	Label string `json:"label,omitempty"`
	// Parent is the session this one was delegated from: closing the
	// parent closes this one first.
	Parent string `json:"parent,omitempty"`
	// Owner is the process whose death closes the session.
	Owner *lineage.Identity `json:"owner,omitempty"`
	// Keep are the session's first keep rules (`lineage run --keep`):
	// they spare processes from every reap of the session.
	Keep []policy.Keep `json:"keep,omitempty"`
	// SelfClose lets a member of the session close it (a CI runner's
	// job-completed hook runs inside the job it ends); that close spares
	// the caller's chain of lineage parents up to its root.
	SelfClose bool `json:"self_close,omitempty"`
}

// AddRoot is the body of POST /v1/roots: register the running process PID
// (started at Start; zero reads it from /proc) as a root of Session,
// opening the session with Kind and Label when it doesn't exist.
type AddRoot struct {
	PID     int64  `json:"pid"`
	Start   uint64 `json:"start,omitempty"`
	Session string `json:"session"`
	// Kind is as in [OpenSession], checked even when the session exists.
	Kind  string `json:"kind,omitempty"`
	Label string `json:"label,omitempty"`
	// Command is what the root is about to run (lineage exec sends the
	// command it will execve); nil reads the argv from /proc.
	Command []string `json:"command,omitempty"`
	// Owner and Keep are as in [OpenSession], for a session this request
	// opens (`lineage run` opens its job's session so). Given for a
	// session that exists, they must be its own (its owner; keep rules
	// it holds), or the request is refused (409): add keeps with
	// POST /v1/keeps.
	Owner *lineage.Identity `json:"owner,omitempty"`
	Keep  []policy.Keep     `json:"keep,omitempty"`
	// Join lets root add a root to a session another uid opened, which
	// it is refused otherwise (409); the session must exist. A session is
	// its opener's: no other uid adds roots to it, join or not.
	Join bool `json:"join,omitempty"`
	// Orphanage declares the caller a child subreaper and the root's
	// parent (`lineage run` registering its job): its other children,
	// the lineage's orphans, are the root's. Where no one saw the forks
	// that made them (bpf: skipped fork hooks; proc: a double fork inside
	// one scan interval), they are adopted into the lineage from the
	// caller's children rather than escaping. A root whose parent is not
	// the caller is refused (400).
	Orphanage bool `json:"orphanage,omitempty"`
}

// AddKeep is the body of POST /v1/keeps: spare one process, or (Root set)
// a root's whole lineage, from reaps, for TTL if given ("30m").
type AddKeep struct {
	Process string `json:"process"`
	Root    bool   `json:"root,omitempty"`
	TTL     string `json:"ttl,omitempty"`
}

// Session is a session as the API shows it.
type Session struct {
	ID      string            `json:"id"`
	Kind    string            `json:"kind"`
	Label   string            `json:"label,omitempty"`
	Parent  string            `json:"parent,omitempty"`
	Owner   *lineage.Identity `json:"owner,omitempty"`
	UID     uint32            `json:"uid"`
	Opened  time.Time         `json:"opened"`
	Roots   []Root            `json:"roots"`
	Keeps   []Keep            `json:"keeps"`
	Closing bool              `json:"closing,omitempty"`

	// SelfClose: see [OpenSession].
	SelfClose bool `json:"self_close,omitempty"`
}

// Root is a registered root as the API shows it.
type Root struct {
	Root    lineage.Identity `json:"root"`
	Session string           `json:"session"`
	Label   string           `json:"label,omitempty"`
	Command []string         `json:"command,omitempty"`
	Added   time.Time        `json:"added"`
	// Orphanage is the process that registered the root as its
	// orphanage (AddRoot's Orphanage), if one did.
	Orphanage *lineage.Identity `json:"orphanage,omitempty"`
	// Members is the live tree, on GET /v1/roots/{id} only.
	Members []Member `json:"members,omitempty"`
}

// Member is one live process of a root's lineage.
type Member struct {
	Process lineage.Identity `json:"process"`
	Parent  lineage.Identity `json:"parent"`
	Comm    string           `json:"comm,omitempty"`
	Argv    []string         `json:"argv,omitempty"`
	Age     time.Duration    `json:"age_ns"`
}

// Keep is a keep request as the API shows it.
type Keep struct {
	Rule    string     `json:"rule"`
	Expires *time.Time `json:"expires,omitempty"`
}

// Ended is what a turn end, a session close or a report returns.
type Ended struct {
	Session  string    `json:"session"`
	Event    string    `json:"event"`
	Kind     string    `json:"kind"`
	Reaping  string    `json:"reaping"`
	Roots    []RootEnd `json:"roots"`
	Children []Ended   `json:"children,omitempty"`
}

// RootEnd is the decision on one root and its outcomes.
type RootEnd struct {
	Root     lineage.Identity `json:"root"`
	Label    string           `json:"label,omitempty"`
	Decision string           `json:"decision"`
	Outcomes []Outcome        `json:"outcomes"`
	Warnings []string         `json:"warnings,omitempty"`
}

// Outcome is what became of one member: a reap's result, or Reported when
// the decision was only to report it.
type Outcome struct {
	Process lineage.Identity `json:"process"`
	Parent  lineage.Identity `json:"parent"`
	Argv    []string         `json:"argv,omitempty"`
	Label   string           `json:"label,omitempty"`
	Session string           `json:"session"`
	Kind    string           `json:"kind"`
	Age     time.Duration    `json:"age_ns"`
	Signals []string         `json:"signals,omitempty"`
	Result  lineage.Result   `json:"result"`
	Reason  string           `json:"reason,omitempty"`
}

// Error is the body of every error response.
type Error struct {
	Error string `json:"error"`
	Code  string `json:"code"`
}

// The error codes, with the HTTP status each comes with.
const (
	CodeInvalid    = "invalid"     // 400
	CodeForbidden  = "forbidden"   // 403
	CodeNotFound   = "not_found"   // 404
	CodeMethod     = "method"      // 405
	CodeTimeout    = "timeout"     // 408
	CodeConflict   = "conflict"    // 409
	CodeTooLarge   = "too_large"   // 413
	CodeTooMany    = "too_many"    // 429: past a quota of the caller's uid
	CodeInternal   = "internal"    // 500
	CodeBadBackend = "unavailable" // 503
)

// Status is the body of GET /v1/status.
type Status struct {
	API      int    `json:"api"`
	Reaping  string `json:"reaping"`
	Sessions int    `json:"sessions"`
	UID      uint32 `json:"caller_uid"`
	// Backend is the tracker's backend: "bpf" or "proc"; BackendReason
	// says why it is the one in use.
	Backend       string `json:"backend,omitempty"`
	BackendReason string `json:"backend_reason,omitempty"`
	// Goroutines is the daemon's goroutine count, for leak checks.
	Goroutines int `json:"goroutines"`
	// Features are what the daemon takes beyond the API's first form, for
	// a client to ask for only what it understands (an older daemon
	// refuses a field it doesn't know): [FeatureOrphanage].
	Features []string `json:"features,omitempty"`
}

// FeatureOrphanage is the daemon's [Status.Features] entry for
// [AddRoot.Orphanage].
const FeatureOrphanage = "orphanage"

// Why is the body of GET /v1/why/{process}: who started the process, as
// its chain of lineage parents from itself up to its root.
type Why struct {
	Process lineage.Identity `json:"process"`
	Session string           `json:"session"`
	Root    lineage.Identity `json:"root"`
	Label   string           `json:"label,omitempty"`
	Chain   []WhyStep        `json:"chain"`
	// Complete is set when the chain reaches the root; otherwise its last
	// step's parent is the first process the daemon no longer knows.
	Complete bool `json:"complete"`
}

// WhyStep is one process of a [Why] chain.
type WhyStep struct {
	Process lineage.Identity `json:"process"`
	// Parent is the lineage parent: the process that created this one,
	// whatever its ppid is now.
	Parent  lineage.Identity `json:"parent"`
	Session string           `json:"session"`
	Root    lineage.Identity `json:"root"`
	// Label is the root's label.
	Label string   `json:"label,omitempty"`
	Comm  string   `json:"comm,omitempty"`
	Argv  []string `json:"argv,omitempty"`
	// Alive is set while the process runs; PPID is then its current
	// parent pid (1, or a subreaper's, once reparented).
	Alive bool `json:"alive"`
	PPID  int  `json:"ppid,omitempty"`
	// Exit is how an exited process ended ("exit 0", "signal KILL").
	Exit   string `json:"exit,omitempty"`
	IsRoot bool   `json:"is_root,omitempty"`
	// Skipped counts exited ancestors between this step and the next that
	// the daemon dropped to bound its memory; Parent is the first of them.
	Skipped int `json:"skipped,omitempty"`
}

// EndRoot is the body of POST /v1/roots/{id}/end: a `lineage run` client's
// job has ended. The server decides on the root's lineage for Event, with
// the session's kind and keeps, reaps it or reports it, forgets the root,
// and answers with the job's report (package jobreport's Report) as a
// standalone run would write it, less what only the client knows (the
// root's exit).
type EndRoot struct {
	// Event is "root-exit" or "deadline".
	Event string `json:"event"`
	// ReapingOff turns reaping off for this end, ReapingBy saying who did
	// (the client's kill switch); it can't turn the daemon's on.
	ReapingOff bool   `json:"reaping_off,omitempty"`
	ReapingBy  string `json:"reaping_by,omitempty"`
	// Linger, Grace and Timeout are as in package jobrun's ReapOptions;
	// zero takes the daemon's.
	Linger  time.Duration `json:"linger_ns,omitempty"`
	Grace   time.Duration `json:"grace_ns,omitempty"`
	Timeout time.Duration `json:"timeout_ns,omitempty"`
	// Close closes the root's session afterwards (a run's own session).
	Close bool `json:"close,omitempty"`
}
