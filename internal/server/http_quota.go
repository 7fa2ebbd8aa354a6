package server

import (
	"fmt"
	"github.com/lineage-dev/lineage/api"
	"net/http"
	"sync"
)

// Quotas bound what one uid other than root may hold open at once: a
// count of what is open now, never a rate, so a client that opens and
// closes a session per test never meets them however long it runs. uid 0
// is counted but never limited. A zero field means no limit.
type Quotas struct {
	// Streams bounds the concurrent GET /v1/events streams.
	Streams int
	// Sessions bounds the open sessions (closing ones included).
	Sessions int
	// Keeps bounds the live keep rules across the uid's sessions, the
	// rules a session opens with included.
	Keeps int
	// OwnerWatches bounds the open sessions with an owner process: each
	// holds a pidfd and a goroutine until the session closes.
	OwnerWatches int
	// Connections bounds the connections open to the socket. Past it a
	// connection is answered 429 as it is accepted and closed.
	Connections int
	// Records bounds the records open (serve --record-dir) for the uid's
	// sessions: a closed session's record stays open, and counted, until
	// its late events are through (10 s).
	Records int
	// FDReserve is how many file descriptors are kept for root's
	// connections and the daemon's own work (its listener, state, records,
	// pidfds): a connection of another uid that would take one of the last
	// FDReserve descriptors below the file limit is answered 429 and
	// closed. Zero means DefaultQuotas' reserve.
	FDReserve int
}

// DefaultQuotas are the quotas `lineage serve` starts with: far above
// what one agent host or CI runner user holds (a session per job, a few
// streams), far below what exhausts a daemon with 65,536 descriptors.
func DefaultQuotas() Quotas {
	return Quotas{
		Streams:      64,
		Sessions:     1024,
		Keeps:        4096,
		OwnerWatches: 256,
		Connections:  256,
		Records:      256,
		FDReserve:    1024,
	}
}

// limit names one quota: its metric reason, its words, its flag.
type limit int

const (
	limitStreams limit = iota
	limitSessions
	limitKeeps
	limitOwnerWatches
	limitConnections
	limitRecords
	limitFiles // the descriptor reserve: not a count per uid
	numLimits
)

// limitNames are each limit's lineage_refused_total reason, its words and
// the serve flag that sets it.
var limitNames = [numLimits]struct{ reason, words, flag string }{
	limitStreams:      {"streams", "event streams", "--max-streams"},
	limitSessions:     {"sessions", "open sessions", "--max-sessions"},
	limitKeeps:        {"keeps", "keep rules", "--max-keeps"},
	limitOwnerWatches: {"owner_watches", "sessions with an owner and armed processes", "--max-owner-watches"},
	limitConnections:  {"connections", "open connections", "--max-connections"},
	limitRecords:      {"records", "open records", "--max-records"},
	limitFiles:        {"files", "file descriptors", "--fd-reserve"},
}

// max is q's bound for l, zero for none.
func (q Quotas) max(l limit) int {
	switch l {
	case limitStreams:
		return q.Streams
	case limitSessions:
		return q.Sessions
	case limitKeeps:
		return q.Keeps
	case limitOwnerWatches:
		return q.OwnerWatches
	case limitConnections:
		return q.Connections
	case limitRecords:
		return q.Records
	}
	return 0
}

// usage counts, per uid, what each holds open. Safe for concurrent use;
// its lock is taken after reg.mu, never before.
type usage struct {
	q       Quotas
	refused func(limit) // counts a refusal (lineage_refused_total)
	mu      sync.Mutex
	held    map[uint32]*[numLimits]int
}

func newUsage(q Quotas, refused func(limit)) *usage {
	return &usage{q: q, refused: refused, held: make(map[uint32]*[numLimits]int)}
}

// take counts n more of l for uid, or refuses with 429 when that would
// take uid past its quota (uid 0 is never refused).
func (u *usage) take(uid uint32, l limit, n int) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	h := u.held[uid]
	if h == nil {
		h = new([numLimits]int)
		u.held[uid] = h
	}
	if m := u.q.max(l); uid != 0 && m > 0 && h[l]+n > m {
		u.refused(l)
		return tooMany(l, uid, m)
	}
	h[l] += n
	return nil
}

// force counts n more of l for uid, whatever the quota: what a daemon
// restores it holds already.
func (u *usage) force(uid uint32, l limit, n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	h := u.held[uid]
	if h == nil {
		h = new([numLimits]int)
		u.held[uid] = h
	}
	h[l] += n
}

// give counts n of l for uid as closed.
func (u *usage) give(uid uint32, l limit, n int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	h := u.held[uid]
	if h == nil {
		return
	}
	h[l] = max(h[l]-n, 0)
	if *h == ([numLimits]int{}) {
		delete(u.held, uid)
	}
}

// count is how many of l uid holds; with all, every uid's.
func (u *usage) count(uid uint32, l limit, all bool) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	if !all {
		if h := u.held[uid]; h != nil {
			return h[l]
		}
		return 0
	}
	n := 0
	for _, h := range u.held {
		n += h[l]
	}
	return n
}

// tooMany is the refusal past a quota: 429 too_many, naming the limit and
// the flag that sets it.
func tooMany(l limit, uid uint32, m int) error {
	n := limitNames[l]
	return errorf(http.StatusTooManyRequests, api.CodeTooMany, "too many %s for uid %d: the limit is %d (lineage serve %s)", n.words, uid, m, n.flag)
}

// validate refuses a negative quota.
func (q Quotas) validate() error {
	for l := limit(0); l < numLimits; l++ {
		if q.max(l) < 0 {
			return fmt.Errorf("quota %s: %d: must not be negative", limitNames[l].flag, q.max(l))
		}
	}
	if q.FDReserve < 0 {
		return fmt.Errorf("quota --fd-reserve: %d: must not be negative", q.FDReserve)
	}
	return nil
}
