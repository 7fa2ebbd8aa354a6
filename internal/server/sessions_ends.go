package server

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

func (s *Server) turnEnd(r *http.Request, p Peer) (int, any, error) {
	se, err := s.changeable(r.PathValue("id"), p, "end a turn")
	if err != nil {
		return 0, nil, err
	}
	out := s.end(r.Context(), se, policy.TurnEnd, p.UID)
	s.save()
	return http.StatusOK, out, nil
}

func (s *Server) closeSessionHandler(r *http.Request, p Peer) (int, any, error) {
	se, spare, err := s.closable(r.PathValue("id"), p)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, s.closeSparing(context.WithoutCancel(r.Context()), se.id, p.UID, spare), nil
}

func (s *Server) reportSession(r *http.Request, p Peer) (int, any, error) {
	s.reg.mu.Lock()
	se, err := s.lookup(r.PathValue("id"), p)
	s.reg.mu.Unlock()
	if err != nil {
		return 0, nil, err
	}
	se.op.Lock()
	s.claimArmed(se)
	se.op.Unlock()
	out := api.Ended{Session: se.id, Event: "report", Kind: se.kind.String(), Reaping: s.opts.Reaping.String(), Roots: []api.RootEnd{}}
	for _, e := range s.rootsOf(se) {
		live, err := e.rt.job.Live()
		re := api.RootEnd{Root: e.id, Label: e.rt.label, Decision: "report: asked for a report", Outcomes: []api.Outcome{}}
		if err != nil {
			re.Warnings = append(re.Warnings, err.Error())
		}
		for _, l := range live {
			re.Outcomes = append(re.Outcomes, se.outcome(l.Member, e.rt.label, l.Argv, l.Age, lineage.Reported, ""))
		}
		out.Roots = append(out.Roots, re)
	}
	return http.StatusOK, out, nil
}

// changeable returns session id for a caller that may change it; a
// closing session is refused.
func (s *Server) changeable(id string, p Peer, what string) (*session, error) {
	s.reg.mu.Lock()
	se, err := s.lookupOpen(id, p)
	s.reg.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if err := s.mayChange(p, what); err != nil {
		return nil, err
	}
	return se, nil
}

type rootEntry struct {
	id lineage.Identity
	rt *root
}

// rootsOf is a sorted snapshot of se's roots.
func (s *Server) rootsOf(se *session) []rootEntry {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	out := make([]rootEntry, 0, len(se.roots))
	for id, rt := range se.roots {
		out = append(out, rootEntry{id, rt})
	}
	slices.SortFunc(out, func(a, b rootEntry) int { return lineage.Compare(a.id, b.id) })
	return out
}

// parallelSettles bounds how many of a session's settled roots are
// finished (published, forgotten) at once; with the bpf backend, their
// listings of the membership map share passes, so the more list at once,
// the fewer passes.
const parallelSettles = 64

// end applies the policy for ev to each of se's roots, on behalf of uid,
// and forgets the roots whose lineage is empty afterwards (all of them on
// a session close). The roots are settled together (tracker.SettleAll: the
// roots to reap are reaped as one, each member judged by its own root's
// rules); the answer lists them in order. The caller saves the state.
func (s *Server) end(ctx context.Context, se *session, ev policy.Event, uid uint32) api.Ended {
	return s.endSparing(ctx, se, ev, uid, nil)
}

// endSparing is end with spare added to the session's keep rules.
func (s *Server) endSparing(ctx context.Context, se *session, ev policy.Event, uid uint32, spare policy.KeepRules) api.Ended {
	se.op.Lock()
	defer se.op.Unlock()
	s.claimArmed(se)
	out := api.Ended{Session: se.id, Event: ev.String(), Kind: se.kind.String(), Reaping: s.opts.Reaping.String(), Roots: []api.RootEnd{}}
	s.reg.mu.Lock()
	keeps := append(se.keepRules(), spare...)
	s.reg.mu.Unlock()
	opts := tracker.SettleOptions{
		Input:  policy.Input{Kind: se.kind, Event: ev, Reaping: s.opts.Reaping},
		Keep:   keeps,
		Refuse: s.killRefuser(uid),
		Reap:   job.ReapOptions{Linger: s.opts.Linger, Grace: s.opts.Grace},
	}
	roots := s.rootsOf(se)
	jobs := make([]*tracker.Job, len(roots))
	for i, e := range roots {
		jobs[i] = e.rt.job
	}
	reps := tracker.SettleAll(ctx, jobs, opts)
	s.syncStreams(ctx)
	ends := make([]api.RootEnd, len(roots))
	var wg sync.WaitGroup
	slots := make(chan struct{}, parallelSettles)
	for i, e := range roots {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			ends[i] = s.settled(se, e, ev, reps[i])
		})
	}
	wg.Wait()
	out.Roots = append(out.Roots, ends...)
	return out
}

// settled publishes the report of one settled root of se, and forgets the
// root when ev calls for that.
func (s *Server) settled(se *session, e rootEntry, ev policy.Event, rep *job.Report) api.RootEnd {
	s.hub.settled(se.id, rep, ev.String())
	s.metrics.settled(rep)
	if ev == policy.SessionClose || s.empty(e.rt) {
		s.forget(se, e)
	}
	return se.rootEnd(e, rep)
}

// empty reports whether rt's lineage has no live member left.
func (s *Server) empty(rt *root) bool {
	ms, err := rt.job.Members()
	return err == nil && len(ms) == 0
}

// forget untracks one root of se.
func (s *Server) forget(se *session, e rootEntry) {
	s.reg.mu.Lock()
	delete(se.roots, e.id)
	s.touch(se)
	s.reg.mu.Unlock()
	s.unindex(e.id)
	if err := e.rt.job.Close(); err != nil {
		s.note("lineage: untrack %s: %v\n", e.id, err)
	}
}

// closeSession closes id's child sessions, then id itself: its roots are
// decided on as a session close calls for, then forgotten, and the session
// is gone.
func (s *Server) closeSession(ctx context.Context, id string, uid uint32) api.Ended {
	return s.closeSparing(ctx, id, uid, nil)
}

// closeSparing is closeSession with spare added to the keep rules of id
// and of its child sessions. The close is saved as begun before anything
// is reaped, and from then on the session takes no new root, keep or
// child: a daemon restarted after a crash finishes it (restore), and a
// child can't be left behind.
func (s *Server) closeSparing(ctx context.Context, id string, uid uint32, spare policy.KeepRules) api.Ended {
	s.reg.mu.Lock()
	se := s.reg.sessions[id]
	var kids []string
	if se != nil {
		se.closing = true
		s.touch(se)
		kids = s.children(id)
	}
	s.reg.mu.Unlock()
	if se == nil {
		return api.Ended{Session: id, Event: policy.SessionClose.String(), Roots: []api.RootEnd{}}
	}
	s.save()
	var done []api.Ended
	for _, kid := range kids {
		done = append(done, s.closeSparing(ctx, kid, uid, spare))
	}
	// Nothing forks under its cookie any more; what did is claimed by
	// the end.
	s.disarmSession(se)
	out := s.endSparing(ctx, se, policy.SessionClose, uid, spare)
	out.Children = done
	s.reg.mu.Lock()
	s.removeSession(se)
	s.reg.mu.Unlock()
	s.endStreams(ctx, se)
	s.forgetCookie(se)
	s.save()
	return out
}

// rootEnd turns a job's report into the API's outcomes.
func (se *session) rootEnd(e rootEntry, rep *job.Report) api.RootEnd {
	re := api.RootEnd{Root: e.id, Label: e.rt.label, Decision: rep.Decision, Outcomes: []api.Outcome{}, Warnings: rep.Warnings}
	result, reason := lineage.Reported, ""
	if rep.RootKept {
		result, reason = lineage.Kept, "its root is kept"
	}
	for _, l := range rep.Leftovers {
		re.Outcomes = append(re.Outcomes, se.outcome(l.Member, e.rt.label, l.Argv, l.Age, result, reason))
	}
	if rep.Reap != nil {
		for _, o := range rep.Reap.Outcomes {
			out := se.outcome(o.Member, e.rt.label, o.Argv, o.Age, o.Result, o.Reason)
			out.Signals = o.Sent
			re.Outcomes = append(re.Outcomes, out)
		}
		re.Warnings = append(re.Warnings, rep.Reap.Warnings...)
	}
	return re
}

func (se *session) outcome(m lineage.Member, label string, argv []string, age time.Duration, result lineage.Result, reason string) api.Outcome {
	return api.Outcome{
		Process: m.Identity, Parent: m.Parent, Argv: argv, Label: label, Session: se.id,
		Kind: se.kind.String(), Age: age, Result: result, Reason: reason,
	}
}
