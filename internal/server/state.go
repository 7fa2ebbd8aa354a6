package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/policy"
	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/internal/tracker"
)

// stateVersion is the version of the state file's layout.
const stateVersion = 1

// stateName is the state file's name in the state directory.
const stateName = "state.json"

// stateFile keeps the server's state in two files: a snapshot (stateName),
// written to a temporary file and renamed over the last one, and beside it
// a journal (journalName, journal.go), to which each save appends, in one
// write(2), what changed since the last: the views of the sessions that
// changed, the ids of those gone, the next session number. A save's work
// is what changed: the server marks the sessions it changes (Server.touch),
// and a save marshals those alone; the views last written are kept, as
// bytes, for the next compaction. Both files are compact JSON (jq shows
// them indented). The journal is compacted into a new snapshot when it
// outgrows its bound, when the server starts and when it closes. Saves are
// serialised by mu, in the order their changes were taken.
//
// Nothing is fsynced. The rename makes a snapshot atomic against the
// daemon's own crash (a kill -9 leaves the page cache, so the old file or
// the new one is read back, never a torn one), and an append that a crash
// cuts short leaves a torn last line, which is ignored at restore: a save is
// read back whole or not at all. What an fsync would add is a state that
// outlives a crash of the kernel or the machine, and that state is useless:
// the pinned maps live in bpffs, which is memory, and every process the
// state names is gone with them. So the snapshot records the boot it was
// written in, and a state from an earlier boot is set aside, snapshot and
// journal, at restore (earlierBoot). Dropping the two fsyncs saved 6 to 12
// ms on every registration; appending instead of renaming saves ext4's
// writeback of the renamed file (its auto_da_alloc heuristic) and the
// writing out of every session at every save.
//
// The files are read back only when they are the daemon's own (files.go).
type stateFile struct {
	dir  string
	boot string // this boot's boot_id, "" when unknown
	// mu serialises the saves; it is taken before Server.mu, never after.
	mu   sync.Mutex
	disk onDisk // guarded by mu
}

// stateOf is the snapshot's layout, its sessions as views (read back) or
// as the bytes of their views (written).
type stateOf[S any] struct {
	Version int `json:"version"`
	// Boot is the kernel's boot_id when the state was written.
	Boot   string `json:"boot,omitempty"`
	NextID int    `json:"next_id"`
	// Seq is the last journal sequence the snapshot includes: records
	// up to it are skipped at replay.
	Seq uint64 `json:"seq,omitempty"`
	// Sessions are as the API shows them, open ones only (a closing one
	// says so: its close is finished at restore).
	Sessions []S `json:"sessions"`
}

// savedState is the state as saved and restored.
type savedState = stateOf[Session]

// change is one save's changes: the views of the sessions that changed,
// marshalled, the ids of those gone, and the next session number.
type change struct {
	views   map[string][]byte
	removed []string
	nextID  int
}

// openState checks the state directory, making it if need be. It takes no
// lock: [Server.Open] takes the directory's (lockState).
func openState(dir string) (*stateFile, error) {
	if err := privateDir(dir, "state dir"); err != nil {
		return nil, err
	}
	// Until the first save, the files hold no view of this server's.
	return &stateFile{dir: dir, boot: bootID(), disk: onDisk{unwritten: true}}, nil
}

// bootIDFile names this boot of the kernel: it changes at every boot.
const bootIDFile = "/proc/sys/kernel/random/boot_id"

// bootID returns this boot's boot_id, or "" when it can't be read.
func bootID() string {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// earlierBoot says whether a state file was written before this boot:
// its boot_id differs from this boot's, or, when either is unknown or the
// file could not be parsed (parsed false: a write cut short by a power
// loss), it was last written before the machine booted.
func (f *stateFile) earlierBoot(st savedState, parsed bool, written, booted time.Time) bool {
	if parsed && st.Boot != "" && f.boot != "" {
		return st.Boot != f.boot
	}
	return written.Before(booted)
}

// touch marks se as changed, for the next save. Call with Server.mu held.
func (s *Server) touch(se *session) {
	if s.state != nil {
		s.dirty[se.id] = true
	}
}

// save writes what changed since the last save, if the server keeps a
// state. Failures are noted, not returned: the API's answer stands, and
// the next save writes a snapshot of everything.
func (s *Server) save() {
	f := s.state
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s.mu.Lock()
	views := make([]Session, 0, len(s.dirty))
	var removed []string
	for id := range s.dirty {
		if se := s.sessions[id]; se != nil {
			views = append(views, se.view())
		} else {
			removed = append(removed, id)
		}
	}
	clear(s.dirty)
	next := s.nextID
	s.mu.Unlock()
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
	c := change{views: make(map[string][]byte, len(views)), removed: removed, nextID: next}
	for _, v := range views {
		data, err := json.Marshal(v)
		if err != nil {
			s.note("lineage: save state: %v\n", err)
			return
		}
		c.views[v.ID] = data
	}
	if err := f.save(c); err != nil {
		s.note("lineage: save state: %v\n", err)
	}
}

// saveMembers adds each root's live members to views, so that a restarted
// daemon can find a lineage whose root exited while no daemon ran. A
// pinned tracker needs none: its map keeps an exited root's lineage for
// the next daemon ([tracker.Tracker.Resume]), so its saves skip the listing (a
// pass over the whole membership map, 0.3 ms at 65,536 entries, at every
// registration).
func saveMembers(views []Session, members map[lineage.Identity][]lineage.Member) {
	for i := range views {
		for k := range views[i].Roots {
			r := &views[i].Roots[k]
			for _, m := range members[r.Root] {
				if m.Identity != r.Root {
					r.Members = append(r.Members, Member{Process: m.Identity, Parent: m.Parent})
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
			s.mu.Lock()
			for _, se := range s.sessions {
				if len(se.roots) > 0 {
					s.touch(se)
				}
			}
			s.mu.Unlock()
			s.backgroundSave()
		}
	}
}

// backgroundSave saves, unless the server is closing: a save the server
// didn't ask for in a request (the loop, a keep's expiry) must not list
// members while the tracker closes.
func (s *Server) backgroundSave() {
	s.bgMu.RLock()
	defer s.bgMu.RUnlock()
	if !s.bgClosed {
		s.save()
	}
}

// writeFile writes data to a new or truncated file at path, mode 0600,
// never through a symbolic link.
func writeFile(path string, data []byte) error {
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	if _, err := out.Write(data); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

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
	st, ok, err := s.state.load(s.note)
	if err != nil || !ok {
		return err
	}
	s.nextID = st.NextID
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
	for _, se := range s.sessions {
		// A child whose parent is gone (an older daemon let one be
		// opened while its parent closed) closes as its parent did.
		if se.parent != "" && s.sessions[se.parent] == nil && !se.closing {
			se.closing = true
			unfinished = append(unfinished, se)
		}
	}
	for _, se := range unfinished {
		// A child's close is its parent's to finish, first.
		if p := s.sessions[se.parent]; p != nil && p.closing {
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

// earlierBootSuffix is added to the names of a state set aside.
const earlierBootSuffix = ".earlier-boot"

// load reads the snapshot and replays the journal over it; ok is false
// when there is no state, or an earlier boot's, set aside. Nothing is
// changed on an error.
func (f *stateFile) load(note func(string, ...any)) (st savedState, ok bool, err error) {
	path := filepath.Join(f.dir, stateName)
	data, err := readOwnFile(path)
	snapshot := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return st, false, fmt.Errorf("read state: %w", err)
	}
	var perr error
	if snapshot {
		perr = json.Unmarshal(data, &st)
	}
	if aside, err := f.setAside(st, snapshot, perr == nil, note); aside || err != nil {
		return savedState{}, false, err
	}
	if perr != nil {
		return st, false, fmt.Errorf("read state %s: %w (move it aside to start empty)", path, perr)
	}
	if snapshot && st.Version != stateVersion {
		return st, false, fmt.Errorf("read state %s: version %d: want %d", path, st.Version, stateVersion)
	}
	jpath := filepath.Join(f.dir, journalName)
	if _, err := os.Lstat(jpath); !snapshot && err == nil {
		return st, false, fmt.Errorf("read state: %s has no %s beside it: remove it to start empty", jpath, stateName)
	}
	recs, last, err := readJournal(jpath, st.Seq, note)
	if err != nil {
		return st, false, err
	}
	replay(&st, recs)
	f.mu.Lock()
	f.disk.seq = last
	f.mu.Unlock()
	return st, snapshot, nil
}

// setAside renames the snapshot and the journal with earlierBootSuffix
// when they are from an earlier boot: the snapshot's (st, parsed when it
// reads), or the journal's when there is no snapshot.
func (f *stateFile) setAside(st savedState, snapshot, parsed bool, note func(string, ...any)) (bool, error) {
	name := stateName
	if !snapshot {
		name = journalName
	}
	info, err := os.Lstat(filepath.Join(f.dir, name))
	if err != nil || !f.earlierBoot(st, parsed, info.ModTime(), time.Now().Add(-proc.BootTime())) {
		return false, nil
	}
	note("lineage: the state in %s is from an earlier boot, whose processes and pins are gone: set aside as %s%s and %s%s\n",
		f.dir, stateName, earlierBootSuffix, journalName, earlierBootSuffix)
	for _, n := range []string{stateName, journalName} {
		p := filepath.Join(f.dir, n)
		if err := os.Rename(p, p+earlierBootSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return true, err
		}
	}
	return true, nil
}

// restoreRoot takes id back as a root of se, as saved in r.
func (s *Server) restoreRoot(se *session, id lineage.Identity, r Root) error {
	j, err := s.tracker.Resume(id, tracker.RegisterOptions{Command: r.Command})
	if err != nil {
		return err
	}
	se.roots[id] = &root{job: j, label: r.Label, command: r.Command, added: r.Added}
	s.rootSession.Store(id, se.id)
	return nil
}

func (s *Server) restoreSession(ss Session) *session {
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
		s.note("lineage: session %s: root %s is gone; %d of its %d members restored as roots\n", se.id, r.Root, n, len(r.Members))
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
	s.sessions[se.id] = se
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
	s.mu.Lock()
	for _, se := range s.sessions {
		for _, k := range se.keeps {
			if !k.expires.IsZero() {
				all = append(all, timed{se, k})
			}
		}
	}
	s.mu.Unlock()
	for _, t := range all {
		if id, _, err := DecodeKeepRule(t.k.rule.String()); err == nil {
			s.expireLater(t.se, id, t.k)
		}
	}
}
