package server

import (
	"encoding/json"
	"errors"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/server/store"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// The server's side of the store (package store keeps the files): what a
// save takes from the sessions, the save loop, and the restore of what the
// store reads back.

// touch marks se as changed, for the next save. Call with reg.mu held.
func (s *Server) touch(se *session) {
	if s.state != nil {
		s.reg.dirty[se.id] = true
	}
}

// save writes what changed since the last save, if the server keeps a
// state. Failures are noted, not returned: the API's answer stands, and
// the next save writes a snapshot of everything. The change is taken under
// the store's lock, so that saves are written in the order they were taken.
func (s *Server) save() {
	if s.state == nil {
		return
	}
	if err := s.state.Save(s.takeChange); err != nil {
		s.note("lineage: save state: %v\n", err)
	}
}

// takeChange takes the sessions changed (or gone) since the last save,
// clearing the registry's dirty set, with their members when the tracker
// isn't pinned, and marshals their views.
func (s *Server) takeChange() (store.Change, error) {
	s.reg.mu.Lock()
	views := make([]api.Session, 0, len(s.reg.dirty))
	var removed []string
	for id := range s.reg.dirty {
		if se := s.reg.sessions[id]; se != nil {
			views = append(views, se.view())
		} else {
			removed = append(removed, id)
		}
	}
	clear(s.reg.dirty)
	next := s.reg.nextID
	s.reg.mu.Unlock()
	if !s.pinned() {
		var roots []lineage.Identity
		for _, v := range views {
			for _, r := range v.Roots {
				roots = append(roots, r.Root)
			}
		}
		if len(roots) > 0 {
			saveMembers(views, s.tracker.MembersOf(roots))
		}
	}
	c := store.Change{Views: make(map[string][]byte, len(views)), Removed: removed, NextID: next}
	for _, v := range views {
		data, err := json.Marshal(v)
		if err != nil {
			return store.Change{}, err
		}
		c.Views[v.ID] = data
	}
	return c, nil
}

// saveMembers adds each root's live members to views, so that a restarted
// daemon can find a lineage whose root exited while no daemon ran. A
// pinned tracker needs none: its map keeps an exited root's lineage for
// the next daemon ([tracker.Tracker.Resume]), so its saves skip the listing (a
// pass over the whole membership map, 0.3 ms at 65,536 entries, at every
// registration).
func saveMembers(views []api.Session, members map[lineage.Identity][]lineage.Member) {
	for i := range views {
		for k := range views[i].Roots {
			r := &views[i].Roots[k]
			for _, m := range members[r.Root] {
				if m.Identity != r.Root {
					r.Members = append(r.Members, api.Member{Process: m.Identity, Parent: m.Parent})
				}
			}
		}
	}
}

// pinned reports whether the tracker is pinned: the bpf backend, which
// pins when asked and fails otherwise.
func (s *Server) pinned() bool {
	return s.opts.Tracker.PinRoot != "" && s.tracker.Backend().Backend == loader.BackendBPF
}

// saveEvery is how often the members of the roots of an unpinned tracker
// are saved even when no request changed them: they come and go on their
// own.
const saveEvery = 2 * time.Second

// saveLoop saves the members of every root every saveEvery until stop is
// closed; a pinned tracker keeps them in the kernel, and needs no loop.
func (s *Server) saveLoop(stop <-chan struct{}) {
	tick := time.NewTicker(saveEvery)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			return
		case <-tick.C:
			s.reg.mu.Lock()
			for _, se := range s.reg.sessions {
				if len(se.roots) > 0 {
					s.touch(se)
				}
			}
			s.reg.mu.Unlock()
			s.backgroundSave()
		}
	}
}

// backgroundSave saves, unless the server is closing: a save the server
// didn't ask for in a request (the loop, a keep's expiry) must not list
// members while the tracker closes.
func (s *Server) backgroundSave() { s.life.inBackground(s.save) }

// restore reads the state back (the snapshot, then the journal's records
// after it): sessions and keeps as they were, roots taken back. A pinned
// tracker that has a root registered still has its lineage exact, members
// forked while no daemon ran included, even when the root itself is gone;
// other roots are registered again (their descendants adopted again from
// /proc), and one that is gone is dropped and said so. A session whose
// owner is gone is closed. A state from an earlier boot is set aside (both
// files renamed with the suffix .earlier-boot) and the daemon starts empty:
// its processes and pins died with that boot, and its identities, counted
// in ticks since boot, could name this boot's processes. A state that
// doesn't read is an error, and nothing is restored.
func (s *Server) restore() error {
	if s.state == nil {
		return nil
	}
	st, ok, err := s.state.Load(s.note)
	if err != nil || !ok {
		return err
	}
	s.reg.nextID = st.NextID
	var orphaned, unfinished []*session
	for _, ss := range st.Sessions {
		se := s.restoreSession(ss)
		switch {
		case se.closing:
			unfinished = append(unfinished, se)
		case se.owner != nil && s.watchOwner(se) != nil:
			orphaned = append(orphaned, se)
		}
	}
	s.rearmKeeps()
	for _, se := range s.reg.sessions {
		// A child whose parent is gone (an older daemon let one be
		// opened while its parent closed) closes as its parent did.
		if se.parent != "" && s.reg.sessions[se.parent] == nil && !se.closing {
			se.closing = true
			unfinished = append(unfinished, se)
		}
	}
	for _, se := range unfinished {
		// A child's close is its parent's to finish, first.
		if p := s.reg.sessions[se.parent]; p != nil && p.closing {
			continue
		}
		s.note("lineage: session %s: its close (or its parent's) began before the last daemon stopped: finishing it (%s)\n", se.id, policy.SessionClose)
		go s.closeSession(contextBackground(), se.id, se.uid)
	}
	for _, se := range orphaned {
		s.note("lineage: session %s: its owner %s is gone: closing it\n", se.id, se.owner)
		go s.closeSession(contextBackground(), se.id, se.uid)
	}
	return nil
}

// restoreRoot takes id back as a root of se, as saved in r.
func (s *Server) restoreRoot(se *session, id lineage.Identity, r api.Root) error {
	opts := tracker.RegisterOptions{Command: r.Command}
	if r.Orphanage != nil {
		opts.Orphanage = *r.Orphanage
	}
	j, err := s.tracker.Resume(id, opts)
	if err != nil {
		return err
	}
	se.roots[id] = &root{job: j, label: r.Label, command: r.Command, added: r.Added, orphanage: r.Orphanage}
	s.reg.rootSession.Store(id, se.id)
	return nil
}

func (s *Server) restoreSession(ss api.Session) *session {
	se := &session{
		id: ss.ID, kind: parseKind(ss.Kind), label: ss.Label, parent: ss.Parent, owner: ss.Owner,
		selfClose: ss.SelfClose, uid: ss.UID, opened: ss.Opened, roots: make(map[lineage.Identity]*root),
		closing: ss.Closing,
	}
	for _, r := range ss.Roots {
		if err := s.restoreRoot(se, r.Root, r); err == nil {
			continue
		} else if !errors.Is(err, lineage.ErrNoProcess) && !errors.Is(err, lineage.ErrIdentityMismatch) {
			s.note("lineage: session %s: root %s not restored: %v\n", se.id, r.Root, err)
			continue
		}
		// The root exited while no daemon ran: what it left behind
		// becomes roots of its own (a member adopted by an earlier one is
		// tracked already).
		n := 0
		for _, m := range r.Members {
			if s.restoreRoot(se, m.Process, r) == nil {
				n++
			}
		}
		s.note("lineage: session %s: root %s is gone; %d of its %d %s restored as %s\n", se.id, r.Root, n, len(r.Members), lineage.Plural(len(r.Members), "member", "members"), lineage.Plural(n, "a root", "roots"))
	}
	for _, k := range ss.Keeps {
		rule, err := policy.ParseKeep(k.Rule)
		if err != nil {
			continue
		}
		// exe rules match the program as named and as resolved: resolved
		// again, as at the session's open. One whose program is gone for
		// now still matches by its name.
		resolved, err := policy.KeepRules{rule}.ResolveExe(s.proc.ExeFile)
		if err != nil {
			s.note("lineage: session %s: %v: kept, matched by its name alone\n", se.id, err)
		}
		kept := keep{rule: resolved[0]}
		if k.Expires != nil {
			kept.expires = *k.Expires
		}
		se.keeps = append(se.keeps, kept)
	}
	s.reg.sessions[se.id] = se
	s.touch(se)
	s.forceSession(se)
	return se
}

// rearmKeeps sets the expiry of every restored keep that has a TTL, once
// every session is back: a keep that expired while no daemon ran expires
// now, with its event, as one that expires later will.
func (s *Server) rearmKeeps() {
	type timed struct {
		se *session
		k  keep
	}
	var all []timed
	s.reg.mu.Lock()
	for _, se := range s.reg.sessions {
		for _, k := range se.keeps {
			if !k.expires.IsZero() {
				all = append(all, timed{se, k})
			}
		}
	}
	s.reg.mu.Unlock()
	for _, t := range all {
		if id, _, err := DecodeKeepRule(t.k.rule.String()); err == nil {
			s.expireLater(t.se, id, t.k)
		}
	}
}
