package job

import "github.com/lineage-dev/lineage/internal/jobrun"

// A job's root as lineage's child, the signals passed on to it, how it
// ended and a run through the daemon are package jobrun's, which links no
// backend (the lean front runs a job through the daemon with it).
type (
	// End is [jobrun.End].
	End = jobrun.End
	// WaitOptions is [jobrun.WaitOptions].
	WaitOptions = jobrun.WaitOptions
	// ReapOptions is [jobrun.ReapOptions].
	ReapOptions = jobrun.ReapOptions
	// Spec is [jobrun.Spec].
	Spec = jobrun.Spec
	// GuardianSpec is [jobrun.GuardianSpec].
	GuardianSpec = jobrun.GuardianSpec
	// StartError is [jobrun.StartError].
	StartError = jobrun.StartError
	// Holder is [jobrun.Holder].
	Holder = jobrun.Holder
	// Remote is [jobrun.Remote].
	Remote = jobrun.Remote
	// RemoteEnd is [jobrun.RemoteEnd].
	RemoteEnd = jobrun.RemoteEnd
)

// ErrNotRegistered is [jobrun.ErrNotRegistered].
var ErrNotRegistered = jobrun.ErrNotRegistered
