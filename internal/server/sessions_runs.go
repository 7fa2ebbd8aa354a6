package server

import (
	"context"
	"fmt"
	"io"
	"net/http"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/job"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// DecodeEndRoot reads and checks the body of POST /v1/roots/{id}/end.
func DecodeEndRoot(r io.Reader) (api.EndRoot, policy.Event, error) {
	var req api.EndRoot
	if err := decodeBody(r, &req); err != nil {
		return req, 0, err
	}
	var ev policy.Event
	switch req.Event {
	case policy.RootExit.String():
		ev = policy.RootExit
	case policy.Deadline.String():
		ev = policy.Deadline
	default:
		return req, 0, fmt.Errorf("%w event %q: want %s or %s", lineage.ErrInvalid, req.Event, policy.RootExit, policy.Deadline)
	}
	if req.Linger < 0 || req.Grace < 0 || req.Timeout < 0 {
		return req, 0, fmt.Errorf("%w durations: must not be negative", lineage.ErrInvalid)
	}
	if len(req.ReapingBy) > 256 {
		return req, 0, fmt.Errorf("%w reaping_by: over 256 bytes", lineage.ErrInvalid)
	}
	return req, ev, nil
}

// endRoot ends a run's root: see [api.EndRoot]. A caller that hangs up hurries
// the reap: what is left is killed without waiting.
func (s *Server) endRoot(r *http.Request, p Peer) (int, any, error) {
	id, err := parseIdentityPath(r)
	if err != nil {
		return 0, nil, err
	}
	req, ev, err := DecodeEndRoot(r.Body)
	if err != nil {
		return 0, nil, err
	}
	se, rt, err := s.findRoot(id, p)
	if err != nil {
		return 0, nil, err
	}
	if err := s.mayChange(p, "end a root"); err != nil {
		return 0, nil, err
	}
	reaping := s.opts.Reaping
	if !reaping.Off && req.ReapingOff {
		reaping = policy.Reaping{Off: true, By: req.ReapingBy}
	}
	opts := tracker.SettleOptions{
		Input:  policy.Input{Kind: se.kind, Event: ev, Reaping: reaping},
		Refuse: s.killRefuser(p.UID),
		Reap:   job.ReapOptions{Linger: req.Linger, Grace: req.Grace, Timeout: req.Timeout},
	}
	if opts.Reap.Grace == 0 {
		opts.Reap.Grace = s.opts.Grace
	}
	rep, err := s.settleRun(r.Context(), se, rootEntry{id, rt}, opts)
	if err != nil {
		return 0, nil, err
	}
	if req.Close {
		s.closeSession(context.WithoutCancel(r.Context()), se.id, p.UID)
	} else {
		s.save()
	}
	return http.StatusOK, rep, nil
}

// settleRun settles e with the session's keeps, then forgets it,
// serialised with se's other work.
func (s *Server) settleRun(ctx context.Context, se *session, e rootEntry, opts tracker.SettleOptions) (*job.Report, error) {
	se.op.Lock()
	defer se.op.Unlock()
	s.reg.mu.Lock()
	_, still := se.roots[e.id]
	opts.Keep = se.keepRules()
	s.reg.mu.Unlock()
	if !still {
		return nil, notFound("no root %s", e.id)
	}
	rep := e.rt.job.SettleRun(ctx, opts)
	s.syncStreams(ctx)
	s.hub.settled(se.id, rep, opts.Input.Event.String())
	s.forget(se, e)
	return rep, nil
}
