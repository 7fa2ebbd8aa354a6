package bpf

import (
	"context"
	"fmt"
	"sync"
)

// syncWaiters are the callers of [BPF.Sync] waiting for Run to find the
// ring buffer empty, each with the sequence number it registered under.
type syncWaiters struct {
	mu      sync.Mutex
	last    uint64
	waiting []syncWaiter
}

type syncWaiter struct {
	seq  uint64
	done chan struct{}
}

// add registers a waiter.
func (s *syncWaiters) add() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last++
	w := syncWaiter{seq: s.last, done: make(chan struct{})}
	s.waiting = append(s.waiting, w)
	return w.done
}

// seq is the sequence number of the last waiter registered.
func (s *syncWaiters) seq() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// pending reports whether a waiter waits.
func (s *syncWaiters) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.waiting) > 0
}

// release lets the waiters registered up to seq go.
func (s *syncWaiters) release(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.waiting[:0]
	for _, w := range s.waiting {
		if w.seq <= seq {
			close(w.done)
		} else {
			kept = append(kept, w)
		}
	}
	s.waiting = kept
}

// Sync returns once Run has delivered every event the kernel had written
// into the ring buffer when Sync was called, or with ctx's error: a read
// of Run's that began after the call found the ring buffer empty (the
// Flush wakes a read that waits; a read that doesn't wait follows it). A
// session's stream ends after its reap's exits so, and a report names
// what its processes exec'd last.
func (b *Tracker) Sync(ctx context.Context) error {
	if b.reader == nil {
		return nil // a handoff reads no events
	}
	done := b.syncs.add()
	if err := b.reader.Flush(); err != nil {
		return fmt.Errorf("sync events: %w", err)
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
