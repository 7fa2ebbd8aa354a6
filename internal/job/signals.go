package job

import (
	"context"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"
)

// passedSignals are passed on to the job: lineage waits for it, then reaps.
var passedSignals = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT}

// fatalSignals are the other signals whose default action would end
// lineage without a reap. Caught, each reaps the lineage at once and makes
// lineage exit 128+N.
var fatalSignals = []os.Signal{
	syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGVTALRM,
	syscall.SIGPROF, syscall.SIGXCPU, syscall.SIGXFSZ, syscall.SIGPWR,
	syscall.SIGSTKFLT, syscall.SIGIO,
}

// Signals are what lineage catches while it runs a job: the signals to pass
// on to its root, the fatal ones, and SIGPIPE. One goroutine uses them.
type Signals struct {
	passed chan os.Signal
	fatal  chan os.Signal
	pipe   chan os.Signal
}

// CatchSignals catches the passed-on and the fatal signals, and SIGPIPE,
// which it drops: a reader of lineage's stderr that went away must not
// cost the reap. (Caught, not ignored: an ignored signal stays ignored
// across exec, and the job must get SIGPIPE as usual.) Call Stop when the
// job is done.
func CatchSignals() *Signals {
	s := &Signals{passed: make(chan os.Signal, 4), fatal: make(chan os.Signal, 1), pipe: make(chan os.Signal, 1)}
	signal.Notify(s.passed, passedSignals...)
	signal.Notify(s.fatal, fatalSignals...)
	signal.Notify(s.pipe, syscall.SIGPIPE)
	return s
}

// Stop stops catching the passed-on and fatal signals.
func (s *Signals) Stop() {
	signal.Stop(s.passed)
	signal.Stop(s.fatal)
	// SIGPIPE stays caught: the report is still to be printed.
}

// DuringReap returns a context for the reap that a fatal signal cancels
// (the reaper then kills what it knows of, stopped members too, without
// waiting), and a function that ends the watch and returns the signal
// that cut the reap short, if any.
func (s *Signals) DuringReap(ctx context.Context) (context.Context, func() os.Signal) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var mu sync.Mutex
	var got os.Signal
	go func() {
		select {
		case sig := <-s.fatal:
			mu.Lock()
			got = sig
			mu.Unlock()
			cancel()
		case <-done:
		}
	}()
	return ctx, func() os.Signal {
		close(done)
		cancel()
		mu.Lock()
		defer mu.Unlock()
		return got
	}
}

// WaitOptions are the wait for the root with these signals, deadline and
// grace (see [WaitOptions]).
func (s *Signals) WaitOptions(deadline, grace time.Duration) WaitOptions {
	return WaitOptions{Deadline: deadline, Signals: s.passed, Fatal: s.fatal, Grace: grace}
}
