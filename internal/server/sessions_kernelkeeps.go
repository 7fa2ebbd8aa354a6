package server

import (
	"github.com/lineage-dev/lineage/policy"
)

// A session's keep rules decide at each of its settles, in user space. The
// kernel kills too, while a root's lineage is reaped: what a member forks
// then is killed at birth unless the member is marked spared. So the
// kernel is told the rules as the session takes them, and applies them in
// the hook run where they apply (tracker.Job.KeepInKernel): an exe rule at
// the exec of its program, a root rule at every fork of the lineage, a rule
// on one process at once. That is when a root is registered (its
// session's rules), when a keep is added (to the session's roots), and when
// the daemon starts again (every restored session's). A keep taken back
// or expired is taken back from the kernel too.

// keepInKernel gives the kernel rules for each of roots, roots of se.
// What the kernel can't take is noted; user space still keeps it at every
// signal.
func (s *Server) keepInKernel(se *session, rules policy.KeepRules, roots []rootEntry) {
	if len(rules) == 0 {
		return
	}
	for _, e := range roots {
		if err := e.rt.job.KeepInKernel(rules); err != nil {
			s.note("lineage: session %s: %v\n", se.id, err)
		}
	}
}

// unkeepInKernel takes rule, a keep se no longer holds, back from the
// kernel for se's roots, and gives it again se's rules that still hold:
// two rules may name one program.
func (s *Server) unkeepInKernel(se *session, rule policy.Keep) {
	roots := s.rootsOf(se)
	for _, e := range roots {
		if err := e.rt.job.UnkeepInKernel(rule); err != nil {
			s.note("lineage: session %s: %v\n", se.id, err)
		}
	}
	s.reg.mu.Lock()
	rules := se.keepRules()
	s.reg.mu.Unlock()
	s.keepInKernel(se, rules, roots)
}

// keepAllInKernel gives the kernel every open session's rules, for its
// roots: after a restore, whether the tracker was taken over pinned (it
// has them already; giving them again changes nothing) or opened anew.
func (s *Server) keepAllInKernel() {
	s.reg.mu.Lock()
	var open []*session
	for _, se := range s.reg.sessions {
		if !se.closed {
			open = append(open, se)
		}
	}
	s.reg.mu.Unlock()
	for _, se := range open {
		s.reg.mu.Lock()
		rules := se.keepRules()
		s.reg.mu.Unlock()
		s.keepInKernel(se, rules, s.rootsOf(se))
	}
}
