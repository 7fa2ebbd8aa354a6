package poll

import (
	"fmt"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// Defaults of the proc backend's adaptive poll interval.
const (
	// DefaultPollBudget is the share of one CPU core the adaptive poller
	// may spend scanning /proc: 5 %.
	DefaultPollBudget = 0.05
	// DefaultMinInterval is the shortest adaptive interval: with few
	// processes a scan costs little, but polling faster than this would
	// catch few more short-lived processes for the wakeups it costs.
	DefaultMinInterval = 20 * time.Millisecond
	// DefaultMaxInterval is the longest adaptive interval. The budget holds
	// as long as a scan costs less than DefaultPollBudget × this (1.5 s of
	// CPU: over 100,000 processes at the measured cost of a scan).
	DefaultMaxInterval = 30 * time.Second
)

// Options tune the proc backend. The zero value gives the defaults.
type Options struct {
	// ProcRoot is where /proc is mounted (default "/proc").
	ProcRoot string
	// Interval, when positive, is a fixed time between two polls. Zero
	// (the default) adapts it to what a scan costs: the interval is the
	// scan's CPU time divided by 80 % of Budget (the rest is headroom for
	// the runtime and for growth between scans), within MinInterval and
	// MaxInterval. Negative is an error; read user input with
	// [ParseInterval], which also refuses zero.
	Interval time.Duration
	// MinInterval and MaxInterval bound the adaptive interval (defaults
	// DefaultMinInterval and DefaultMaxInterval).
	MinInterval, MaxInterval time.Duration
	// Budget is the share of one CPU core the adaptive poller may spend, in
	// (0, 1] (default DefaultPollBudget).
	Budget float64
	// Reaper, when set, is the process's one reaper of its children (in
	// lineage, supervise.Children). It reaps the members that are this
	// process's children (the spawned roots, and the orphans reparented
	// here when this process is a child subreaper); through it the backend
	// learns their exit statuses. The proc backend itself never waits for
	// a child.
	Reaper ChildReaper
	// MaxPending bounds the events waiting for Run (default 65536); events
	// beyond it are dropped and counted as EventsLost. Membership stays
	// exact.
	MaxPending int
}

// Polling describes the proc backend's polling.
type Polling struct {
	// Scans counts completed scans of /proc.
	Scans uint64 `json:"scans"`
	// Processes is how many processes the last scan saw.
	Processes int `json:"processes"`
	// ScanCPU is the CPU time of the last scan.
	ScanCPU time.Duration `json:"scan_cpu_ns"`
	// Interval is the time between two polls now.
	Interval time.Duration `json:"interval_ns"`
	// Adaptive is set when Interval follows the cost of a scan.
	Adaptive bool `json:"adaptive"`
	// Unattributed counts orphans reparented to this process that could not
	// be attributed to exactly one spawned root: they escaped, and an
	// EventFork with Untracked set said so.
	Unattributed uint64 `json:"unattributed"`
}

// ChildReaper is what the proc backend needs of the process's one reaper of
// its children: the status of each child reaped, and a way to wait for the
// reports of the reaps already done.
type ChildReaper interface {
	// OnReap has fn called with the pid and wait status of every child
	// reaped from then on. fn does not block and calls nothing of the
	// reaper.
	OnReap(fn func(pid int, status lineage.ExitStatus))
	// Sync returns once every child reaped before the call has been
	// reported to the OnReap function.
	Sync()
}

// Validate checks o. Errors wrap lineage.ErrInvalid.
func (o *Options) Validate() error {
	if o == nil {
		return nil
	}
	switch {
	case o.Interval < 0:
		return fmt.Errorf("%w option: poll interval %v: must be positive", lineage.ErrInvalid, o.Interval)
	case o.MinInterval < 0 || o.MaxInterval < 0:
		return fmt.Errorf("%w option: poll interval bounds %v, %v: must not be negative", lineage.ErrInvalid, o.MinInterval, o.MaxInterval)
	case o.MinInterval > 0 && o.MaxInterval > 0 && o.MinInterval > o.MaxInterval:
		return fmt.Errorf("%w option: poll interval bounds: minimum %v is above maximum %v", lineage.ErrInvalid, o.MinInterval, o.MaxInterval)
	case o.Budget < 0 || o.Budget > 1:
		return fmt.Errorf("%w option: poll budget %v: want a share of one core in (0, 1]", lineage.ErrInvalid, o.Budget)
	case o.MaxPending < 0:
		return fmt.Errorf("%w option: max pending events %d: must not be negative", lineage.ErrInvalid, o.MaxPending)
	}
	return nil
}

func (o *Options) withDefaults() Options {
	out := Options{}
	if o != nil {
		out = *o
	}
	if out.ProcRoot == "" {
		out.ProcRoot = "/proc"
	}
	if out.MinInterval == 0 {
		out.MinInterval = DefaultMinInterval
	}
	if out.MaxInterval == 0 {
		out.MaxInterval = max(DefaultMaxInterval, out.MinInterval)
	}
	if out.Budget == 0 {
		out.Budget = DefaultPollBudget
	}
	if out.MaxPending == 0 {
		out.MaxPending = defaultMaxPending
	}
	return out
}

// defaultMaxPending bounds the proc backend's queue of events for Run.
const defaultMaxPending = 65536
