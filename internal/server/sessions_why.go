package server

import (
	"fmt"
	"net/http"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
)

// why answers GET /v1/why/{process}, where process is PID (a live process)
// or PID@START (also an exited ancestor of a live member).
func (s *Server) why(r *http.Request, p Peer) (int, any, error) {
	id, err := s.whyIdentity(r.PathValue("process"))
	if err != nil {
		return 0, nil, err
	}
	type entry struct {
		se *session
		rootEntry
	}
	var roots []entry
	s.reg.mu.Lock()
	for _, se := range s.reg.sessions {
		if !se.visible(p) {
			continue
		}
		for rid, rt := range se.roots {
			roots = append(roots, entry{se, rootEntry{rid, rt}})
		}
	}
	s.reg.mu.Unlock()
	for _, e := range roots {
		steps, ok, err := e.rt.job.Why(id)
		if err != nil || !ok {
			continue
		}
		return http.StatusOK, e.se.whyView(id, e.rootEntry, steps), nil
	}
	// Another uid's process is, to a caller other than root, as one that
	// isn't tracked, or doesn't exist.
	return 0, nil, notFound("process %s is not tracked by lineage (or it exited, and no live member descends from it)", id)
}

// whyIdentity reads PID or PID@START; a bare pid must name a live process.
func (s *Server) whyIdentity(text string) (lineage.Identity, error) {
	id, err := lineage.ParseProcess(text)
	if err != nil || id.StartTicks != 0 {
		return id, err
	}
	if id, err = s.proc.Identity(int(id.PID)); err != nil {
		return lineage.Identity{}, fmt.Errorf("process %s: %w", text, err)
	}
	return id, nil
}

// whyView is a job's chain as the API shows it. se's fields it reads
// don't change after the session opens.
func (se *session) whyView(id lineage.Identity, e rootEntry, steps []tracker.Step) api.Why {
	v := api.Why{Process: id, Session: se.id, Root: e.id, Label: e.rt.label, Chain: []api.WhyStep{}}
	for _, st := range steps {
		ws := api.WhyStep{
			Process: st.Identity, Parent: st.Parent, Session: se.id, Root: e.id, Label: e.rt.label,
			Comm: st.Comm, Argv: st.Argv, Alive: st.Alive, PPID: st.PPID, IsRoot: st.Identity == e.id, Skipped: st.Skipped,
		}
		if st.Exited && !st.Alive {
			ws.Exit = st.Status.String()
		}
		v.Chain = append(v.Chain, ws)
	}
	v.Complete = len(v.Chain) > 0 && v.Chain[len(v.Chain)-1].IsRoot
	return v
}
