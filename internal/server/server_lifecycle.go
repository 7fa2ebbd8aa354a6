package server

import "sync"

// lifecycle is the server's background work and its one close: the loops
// that run from Open to Close (the loss watcher, the save loop), the work
// no request asked for (a background save, a keep's expiry), and the Once
// that makes Close run once and return the same error to every caller.
//
// Close's order is the point: the loops stop and are waited for
// (stopLoops), then endBackground takes bg's write lock and marks the
// background closed, and only then does the tracker close; background work
// runs under bg's read lock, so none of it lists or changes the tracker
// while it closes. Lock order: bg (read) before the store's save lock and
// the registry's mu, never after.
type lifecycle struct {
	// stop ends the loops; loops counts them, waited for at close.
	stop  chan struct{}
	loops sync.WaitGroup
	// bg orders the background work before the tracker's close, which
	// sets bgClosed under its write lock first.
	bg       sync.RWMutex
	bgClosed bool
	// closing runs the close once; closeErr is its result.
	closing  sync.Once
	closeErr error
}

func newLifecycle() lifecycle { return lifecycle{stop: make(chan struct{})} }

// goLoop runs loop on its own goroutine until stop is closed.
func (l *lifecycle) goLoop(loop func(stop <-chan struct{})) {
	l.loops.Add(1)
	go func() {
		defer l.loops.Done()
		loop(l.stop)
	}()
}

// stopLoops ends the loops and waits for them.
func (l *lifecycle) stopLoops() {
	close(l.stop)
	l.loops.Wait()
}

// inBackground runs work under bg's read lock, unless the background is
// closed: then it does nothing.
func (l *lifecycle) inBackground(work func()) {
	l.bg.RLock()
	defer l.bg.RUnlock()
	if !l.bgClosed {
		work()
	}
}

// endBackground waits for the background work running and refuses any
// later.
func (l *lifecycle) endBackground() {
	l.bg.Lock()
	l.bgClosed = true
	l.bg.Unlock()
}

// closeOnce runs close the first time it is called, and returns its error
// every time.
func (l *lifecycle) closeOnce(close func() error) error {
	l.closing.Do(func() { l.closeErr = close() })
	return l.closeErr
}
