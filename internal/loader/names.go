package loader

import "github.com/lineage-dev/lineage/internal/backend"

// The backends' names, options, choice and counters are package backend's,
// which links no backend (the lean front parses and reports with them).

// The backends a user can choose with --backend.
const (
	BackendAuto  = backend.Auto
	BackendBPF   = backend.BPF
	BackendProc  = backend.Proc
	OnFullKill   = backend.OnFullKill
	OnFullEscape = backend.OnFullEscape
	// DefaultMaxMembers is [backend.DefaultMaxMembers].
	DefaultMaxMembers = backend.DefaultMaxMembers
)

type (
	// Choice is [backend.Choice].
	Choice = backend.Choice
	// Stats is [backend.Stats].
	Stats = backend.Stats
	// OnFull is [backend.OnFull].
	OnFull = backend.OnFull
)

// The options' parsers and checks.
var (
	ParseBackend       = backend.Parse
	ValidateMaxMembers = backend.ValidateMaxMembers
	ParseOnFull        = backend.ParseOnFull
	ParseInterval      = backend.ParseInterval
)
