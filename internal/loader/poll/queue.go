package poll

import (
	"context"
	"errors"
	"sync"

	"github.com/lineage-dev/lineage/lineage"
)

// eventQueue holds the proc backend's events until Run delivers them. It is
// bounded: events beyond its size are dropped and counted. It is safe for
// concurrent use; run may be called once.
type eventQueue struct {
	mu      sync.Mutex
	pending []lineage.Event
	max     int
	lost    uint64
	ran     bool
	notify  chan struct{}
}

func newEventQueue(max int) *eventQueue {
	return &eventQueue{max: max, notify: make(chan struct{}, 1)}
}

// push queues evs, as many as fit.
func (q *eventQueue) push(evs []lineage.Event) {
	if len(evs) == 0 {
		return
	}
	q.mu.Lock()
	room := max(q.max-len(q.pending), 0)
	if len(evs) > room {
		q.lost += uint64(len(evs) - room)
		evs = evs[:room]
	}
	q.pending = append(q.pending, evs...)
	q.mu.Unlock()
	select {
	case q.notify <- struct{}{}:
	default:
	}
}

// lostCount returns how many events were dropped.
func (q *eventQueue) lostCount() uint64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.lost
}

// run delivers the queued events to fn, in order, until ctx is done or done
// is closed; then it delivers what is still queued and returns nil.
func (q *eventQueue) run(ctx context.Context, done <-chan struct{}, fn func(lineage.Event)) error {
	q.mu.Lock()
	if q.ran {
		q.mu.Unlock()
		return errors.New("proc backend: run: already running")
	}
	q.ran = true
	q.mu.Unlock()
	var batch []lineage.Event
	deliver := func() {
		q.mu.Lock()
		batch, q.pending = q.pending, batch[:0]
		q.mu.Unlock()
		for _, ev := range batch {
			fn(ev)
		}
		clear(batch)
	}
	for {
		select {
		case <-ctx.Done():
			deliver()
			return nil
		case <-done:
			deliver()
			return nil
		case <-q.notify:
			deliver()
		}
	}
}
