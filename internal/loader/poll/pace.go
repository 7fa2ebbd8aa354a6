package poll

import "time"

// budgetAim is the share of the budget the scans themselves aim at; the rest
// is for what a scan's CPU time doesn't show (the runtime's wakeups and
// garbage collection) and for processes appearing between two scans.
const budgetAim = 0.8

// procPacer sets the time between two polls of the proc backend: the fixed
// Options.Interval, or one that follows the cost of a scan so that
// polling stays within Options.Budget. It is not safe for concurrent
// use.
type procPacer struct {
	fixed, min, max time.Duration
	budget          float64
	// cost is the scan cost the interval follows: a rise at once, a fall
	// slowly, so the budget holds while the number of processes grows.
	cost     time.Duration
	interval time.Duration
}

func newProcPacer(o Options) procPacer {
	return procPacer{fixed: o.Interval, min: o.MinInterval, max: o.MaxInterval, budget: o.Budget}
}

// adaptive reports whether the interval follows the cost of a scan.
func (pc *procPacer) adaptive() bool { return pc.fixed <= 0 }

// observe takes the CPU time of a scan and returns the interval until the
// next one.
func (pc *procPacer) observe(cost time.Duration) time.Duration {
	if !pc.adaptive() {
		pc.interval = pc.fixed
		return pc.interval
	}
	if cost > pc.cost {
		pc.cost = cost
	} else {
		pc.cost = (3*pc.cost + cost) / 4
	}
	iv := time.Duration(float64(pc.cost) / (pc.budget * budgetAim)).Round(time.Microsecond)
	pc.interval = min(max(iv, pc.min), pc.max)
	return pc.interval
}
