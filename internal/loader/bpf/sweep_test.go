package bpf

import (
	"runtime"
	"sync"
	"testing"
	"time"
)

// Callers that come while a pass runs share the next one, and each gets
// the result of a pass that started after it called.
func TestSweepsShareTheNextPass(t *testing.T) {
	var s sweeps[int]
	passes := 0 // passes started; read by the pass itself, under s.run
	started, release := make(chan struct{}), make(chan struct{})
	pass := func() (int, error) {
		passes++
		if passes == 1 {
			close(started)
			<-release
		}
		return passes, nil
	}
	first := make(chan int)
	go func() {
		n, _ := s.share(pass)
		first <- n
	}()
	<-started
	const n = 8
	got := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { got[i], _ = s.share(pass) })
	}
	awaitSweep(t, &s, func(w *sweep[int]) bool { return w != nil && w.callers == n })
	close(release)
	if r := <-first; r != 1 {
		t.Errorf("first caller got pass %d, want 1", r)
	}
	wg.Wait()
	for i, r := range got {
		if r != 2 {
			t.Errorf("caller %d got pass %d; want 2, the one after its call", i, r)
		}
	}
	if passes != 2 {
		t.Errorf("%d passes for %d callers, want 2", passes, n+1)
	}
}

// awaitSweep waits until ok holds of s's waiting pass (a minute at most).
func awaitSweep(t *testing.T, s *sweeps[int], ok func(*sweep[int]) bool) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; runtime.Gosched() {
		s.mu.Lock()
		done := ok(s.next)
		s.mu.Unlock()
		if done {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the callers did not join the pass within a minute")
		}
	}
}
