package server

import (
	"sync"

	"github.com/lineage-dev/lineage/lineage"
)

// registry is the sessions' part of the server: every open session by id,
// the number the next unnamed session takes, the sessions changed since
// the last save, and the index from a root to its session's id.
//
// mu guards sessions, nextID, dirty and the fields of every session
// (sessions.go); it is never held across I/O or a call to the tracker.
// Lock order: the store's save lock (a save takes its change under it),
// then mu, then the quotas' lock (http_quota.go); never the reverse. The
// arms keep a lock of their own (sessions_arms.go). rootSession is read
// without mu, by the event filter on the tracker's goroutine: it is
// written beside the session's roots, and kept a while after a root is
// forgotten, for its last events.
type registry struct {
	mu       sync.Mutex
	sessions map[string]*session
	nextID   int
	// dirty names the sessions changed (or gone) since the last save.
	dirty map[string]bool
	// rootSession maps a root (lineage.Identity) to its session's id.
	rootSession sync.Map
}

func newRegistry() registry {
	return registry{sessions: make(map[string]*session), dirty: make(map[string]bool)}
}

// sessionOf returns the id of the session id is a root of, "" when none.
// It takes no lock.
func (r *registry) sessionOf(id lineage.Identity) string {
	v, _ := r.rootSession.Load(id)
	sid, _ := v.(string)
	return sid
}
