package bpf

import "sync"

// sweeps lets concurrent listings of the membership map share one pass
// over it: a session's roots settled at once each list their members
// several times (every terminate and kill pass), and each listing used to
// read the whole map. A caller joins the next pass, one not started yet;
// that pass's first caller runs it once the pass before has ended. Every
// pass starts after all its callers called, so each gets a listing as
// exact as a pass of its own, and N reaps listing at once cost one pass.
// The zero value is ready; it is safe for concurrent use.
type sweeps[T any] struct {
	mu   sync.Mutex // guards next
	next *sweep[T]  // the pass callers join now; nil when none waits
	run  sync.Mutex // held while a pass runs
}

// sweep is one pass and the callers that share it.
type sweep[T any] struct {
	done    chan struct{}
	callers int // how many share it (guarded by sweeps.mu)
	out     T
	err     error
}

// share returns the result of a call of pass made after share was called,
// shared with the callers of share that joined the same pass. The result
// is shared: callers must not modify it.
func (s *sweeps[T]) share(pass func() (T, error)) (T, error) {
	s.mu.Lock()
	w := s.next
	lead := w == nil
	if lead {
		w = &sweep[T]{done: make(chan struct{})}
		s.next = w
	}
	w.callers++
	s.mu.Unlock()
	if !lead {
		<-w.done
		return w.out, w.err
	}
	s.run.Lock()
	s.mu.Lock()
	s.next = nil // from here on, callers join the pass after this one
	s.mu.Unlock()
	w.out, w.err = pass()
	s.run.Unlock()
	close(w.done)
	return w.out, w.err
}
