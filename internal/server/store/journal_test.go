package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/lineage"
)

// states drives a Store as a server would: a state that changes, saved
// after each change with the next sequence.
type states struct {
	t   *testing.T
	f   *Store
	st  snapshot[api.Session]
	seq uint64 // saves so far
}

func newStates(t *testing.T, dir string) *states {
	t.Helper()
	f, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return &states{t: t, f: f, st: snapshot[api.Session]{Version: stateVersion, Boot: f.boot, Sessions: []api.Session{}}}
}

// save saves every session's view, as a change: the Store writes
// what differs from what it wrote last.
func (s *states) save() {
	s.t.Helper()
	s.seq++
	if err := saveAll(s.f, s.st); err != nil {
		s.t.Fatal(err)
	}
}

// saveAll saves st whole: its sessions' views, and as removed those the
// Store holds that st doesn't.
func saveAll(f *Store, st snapshot[api.Session]) error {
	c := Change{Views: make(map[string][]byte), NextID: st.NextID}
	for _, v := range st.Sessions {
		data, err := json.Marshal(v)
		if err != nil {
			return err
		}
		c.Views[v.ID] = data
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for id := range f.disk.views {
		if _, ok := c.Views[id]; !ok {
			c.Removed = append(c.Removed, id)
		}
	}
	return f.save(c)
}

// open adds a session whose label is pad bytes long.
func (s *states) open(id string, pad int) {
	s.st.NextID++
	s.st.Sessions = append(s.st.Sessions, api.Session{
		ID: id, Kind: "autonomous", Label: strings.Repeat("x", pad), UID: 1000,
		Opened: time.Unix(1700000000, 0).UTC(), Roots: []api.Root{}, Keeps: []api.Keep{},
	})
}

func (s *states) session(id string) *api.Session {
	for i := range s.st.Sessions {
		if s.st.Sessions[i].ID == id {
			return &s.st.Sessions[i]
		}
	}
	s.t.Fatalf("no session %s", id)
	return nil
}

func (s *states) close(id string) {
	s.st.Sessions = slices.DeleteFunc(s.st.Sessions, func(se api.Session) bool { return se.ID == id })
}

// loaded reads the state directory back as a restarting server would.
func loaded(t *testing.T, dir string) (snapshot[api.Session], string) {
	t.Helper()
	f, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	st, ok, err := f.load(func(format string, args ...any) { fmt.Fprintf(&log, format, args...) })
	if err != nil || !ok {
		t.Fatalf("load: ok %v, %v", ok, err)
	}
	return st, log.String()
}

// sameSessions fails t unless got holds the sessions of want, in any order,
// and its next id.
func sameSessions(t *testing.T, got, want snapshot[api.Session]) {
	t.Helper()
	sorted := func(st snapshot[api.Session]) string {
		ss := slices.Clone(st.Sessions)
		slices.SortFunc(ss, func(a, b api.Session) int { return strings.Compare(a.ID, b.ID) })
		data, _ := json.Marshal(ss)
		return fmt.Sprintf("next %d %s", st.NextID, data)
	}
	if g, w := sorted(got), sorted(want); g != w {
		t.Errorf("read back:\n%.2000s\nwant:\n%.2000s", g, w)
	}
}

func readSnapshot(t *testing.T, dir string) snapshot[api.Session] {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, SnapshotName))
	if err != nil {
		t.Fatal(err)
	}
	var st snapshot[api.Session]
	if err := json.Unmarshal(data, &st); err != nil {
		t.Fatal(err)
	}
	return st
}

func journalLines(t *testing.T, dir string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, JournalName))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

// Many changes, saved one by one, read back as the last save: the snapshot
// compacted past the journal's bound, the journal's records over it.
func TestJournalRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := newStates(t, dir)
	rnd := rand.New(rand.NewPCG(1, 2))
	var open []string
	for i := range 400 {
		switch r := rnd.IntN(10); {
		case len(open) == 0 || r < 3:
			id := fmt.Sprintf("s%d", i)
			s.open(id, 2000)
			open = append(open, id)
		case r < 7:
			se := s.session(open[rnd.IntN(len(open))])
			id := lineage.Identity{PID: uint32(1000 + i), StartTicks: uint64(i)}
			se.Roots = append(se.Roots, api.Root{Root: id, Session: se.ID, Command: []string{"sh", "-c", "x"}, Added: time.Unix(int64(i), 0).UTC()})
		case r < 8:
			se := s.session(open[rnd.IntN(len(open))])
			se.Keeps = append(se.Keeps, api.Keep{Rule: fmt.Sprintf("pid:%d@%d", i, i)})
		default:
			k := rnd.IntN(len(open))
			s.close(open[k])
			open = slices.Delete(open, k, k+1)
		}
		s.save()
	}
	snap := readSnapshot(t, dir)
	if snap.Seq <= 1 {
		t.Errorf("snapshot seq %d: the journal was never compacted", snap.Seq)
	}
	lines := journalLines(t, dir)
	if len(lines) < 2 {
		t.Errorf("%d journal lines: the read back replays nothing", len(lines))
	}
	if info, err := os.Stat(filepath.Join(dir, JournalName)); err != nil || info.Size() > max(journalFloor, journalRatio*int64(len(mustJSON(t, snap)))) {
		t.Errorf("journal %v past its bound (%v)", info.Size(), err)
	} else if info.Mode().Perm() != 0o600 {
		t.Errorf("journal mode %v, want 0600", info.Mode().Perm())
	}
	got, log := loaded(t, dir)
	sameSessions(t, got, s.st)
	if log != "" {
		t.Errorf("notes on a clean read: %s", log)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// A save appends one line: the sessions that changed, whole, and those
// gone; a save that changes nothing appends nothing.
func TestJournalAppendsChanges(t *testing.T) {
	dir := t.TempDir()
	s := newStates(t, dir)
	s.open("a", 0)
	s.open("b", 0)
	s.save() // the first save writes a snapshot
	s.session("b").Label = "changed"
	s.save()
	s.save()
	s.close("a")
	s.save()
	lines := journalLines(t, dir)
	if len(lines) != 2 {
		t.Fatalf("journal:\n%s\nwant 2 lines", strings.Join(lines, "\n"))
	}
	var first, second journalRecord[api.Session]
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if len(first.Sessions) != 1 || first.Sessions[0].ID != "b" || first.Sessions[0].Label != "changed" || len(first.Removed) != 0 || first.NextID != nil {
		t.Errorf("record %s: want session b alone", lines[0])
	}
	if len(second.Sessions) != 0 || !slices.Equal(second.Removed, []string{"a"}) || second.Seq != first.Seq+1 || first.Seq != readSnapshot(t, dir).Seq+1 {
		t.Errorf("records %s, %s: want a removed, sequences following the snapshot's", lines[0], lines[1])
	}
	got, _ := loaded(t, dir)
	sameSessions(t, got, s.st)
}

// A clean close compacts: one snapshot, no journal; a save after it writes
// a snapshot alone.
func TestJournalCompactsAtClose(t *testing.T) {
	dir := t.TempDir()
	s := newStates(t, dir)
	s.open("a", 10)
	s.save()
	s.open("b", 10)
	s.save()
	if err := s.f.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, JournalName)); !os.IsNotExist(err) {
		t.Errorf("journal after close: %v", err)
	}
	sameSessions(t, readSnapshot(t, dir), s.st)
	s.open("c", 10)
	s.save()
	if _, err := os.Stat(filepath.Join(dir, JournalName)); !os.IsNotExist(err) {
		t.Errorf("journal after a save after close: %v", err)
	}
	sameSessions(t, readSnapshot(t, dir), s.st)
}

// A crash between a compaction's rename and the journal's reset leaves the
// old journal beside the newer snapshot: its records are skipped.
func TestJournalBesideANewerSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := newStates(t, dir)
	s.open("a", 10)
	s.save()
	s.open("b", 10)
	s.save()
	s.close("a")
	s.save()
	old, err := os.ReadFile(filepath.Join(dir, JournalName))
	if err != nil || len(old) == 0 {
		t.Fatalf("journal %q: %v", old, err)
	}
	// b's close is in the snapshot alone: replayed, the old journal's
	// record of b would bring it back.
	s.close("b")
	s.save()
	if err := s.f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, JournalName), old, 0o600); err != nil {
		t.Fatal(err)
	}
	got, _ := loaded(t, dir)
	sameSessions(t, got, s.st)
	f, _ := Open(dir)
	if _, _, err := f.load(func(string, ...any) {}); err != nil || f.disk.seq != readSnapshot(t, dir).Seq {
		t.Errorf("read back seq %d (%v), want the snapshot's %d", f.disk.seq, err, readSnapshot(t, dir).Seq)
	}
}

// A torn last line (a crash mid-append) is ignored, with a note; the saves
// before it are read back.
func TestJournalTornLastLine(t *testing.T) {
	dir := t.TempDir()
	s := newStates(t, dir)
	s.open("a", 10)
	s.save()
	s.open("b", 10)
	s.save()
	want := s.st
	want.Sessions = slices.Clone(want.Sessions)
	s.open("c", 10)
	s.save()
	path := filepath.Join(dir, JournalName)
	data, _ := os.ReadFile(path)
	cut := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1 + 20
	if err := os.WriteFile(path, data[:cut], 0o600); err != nil {
		t.Fatal(err)
	}
	got, log := loaded(t, dir)
	sameSessions(t, got, want)
	if !strings.Contains(log, "line 2 is torn") || !strings.Contains(log, path) {
		t.Errorf("note %q: want the file and its torn line", log)
	}
}

// A record that doesn't read before the end is an error naming the file
// and the line; nothing is read back and no file changes.
func TestJournalCorruptLine(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(lines []string) []string
		want string
	}{
		{"not json", func(l []string) []string { l[1] = `{"seq":` + l[1][7:20]; return l }, "line 2:"},
		{"a record missing", func(l []string) []string { return slices.Delete(l, 1, 2) }, "line 2: sequence"},
		{"blank line", func(l []string) []string { return slices.Insert(l, 1, "") }, "line 2:"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			s := newStates(t, dir)
			for i := range 4 {
				s.open(fmt.Sprint(i), 10)
				s.save()
			}
			path := filepath.Join(dir, JournalName)
			lines := c.edit(journalLines(t, dir))
			if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			before := dirContents(t, dir)
			f, _ := Open(dir)
			var log bytes.Buffer
			st, ok, err := f.Load(func(format string, args ...any) { fmt.Fprintf(&log, format, args...) })
			if err == nil || !strings.Contains(err.Error(), path+" "+c.want) {
				t.Errorf("load: %v, want an error naming %s %s", err, path, c.want)
			}
			if ok {
				t.Errorf("load: ok, %d sessions, next id %d, from a corrupt journal", len(st.Sessions), st.NextID)
			}
			if after := dirContents(t, dir); after != before {
				t.Errorf("the state directory changed:\n%s\nwas\n%s", after, before)
			}
		})
	}
}

// dirContents is every file in dir with its contents, as text.
func dirContents(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(dir, e.Name()))
		fmt.Fprintf(&b, "%s: %s\n", e.Name(), data)
	}
	return b.String()
}

// A journal with no snapshot beside it is not replayed over nothing.
func TestJournalWithoutSnapshot(t *testing.T) {
	dir := t.TempDir()
	s := newStates(t, dir)
	s.open("a", 10)
	s.save()
	s.open("b", 10)
	s.save()
	if err := os.Remove(filepath.Join(dir, SnapshotName)); err != nil {
		t.Fatal(err)
	}
	f, _ := Open(dir)
	if _, _, err := f.load(func(string, ...any) {}); err == nil || !strings.Contains(err.Error(), "has no "+SnapshotName) {
		t.Errorf("load: %v, want an error about the missing snapshot", err)
	}
}

// A save writes what changed, however many sessions the state holds: one
// changed session of a thousand is one session in the journal's record,
// and a save that changes nothing writes nothing.
func TestSaveWritesWhatChanged(t *testing.T) {
	dir := t.TempDir()
	f, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	all := Change{Views: make(map[string][]byte), NextID: 1000}
	for i := range 1000 {
		id := fmt.Sprintf("s%d", i)
		all.Views[id] = []byte(fmt.Sprintf(`{"id":%q,"kind":"autonomous","uid":1000,"opened":"2026-01-01T00:00:00Z","roots":[],"keeps":[]}`, id))
	}
	save := func(c Change) {
		t.Helper()
		if err := f.Save(func() (Change, error) { return c, nil }); err != nil {
			t.Fatal(err)
		}
	}
	save(all) // a snapshot
	save(Change{Views: map[string][]byte{"s7": []byte(`{"id":"s7","kind":"autonomous","label":"x","uid":1000,"opened":"2026-01-01T00:00:00Z","roots":[],"keeps":[]}`)}, NextID: 1000})
	save(Change{NextID: 1000})
	save(Change{Removed: []string{"s9"}, NextID: 1000})
	lines := journalLines(t, dir)
	if len(lines) != 2 {
		t.Fatalf("journal:\n%s\nwant 2 lines", strings.Join(lines, "\n"))
	}
	var rec journalRecord[api.Session]
	if err := json.Unmarshal([]byte(lines[0]), &rec); err != nil || len(rec.Sessions) != 1 || rec.Sessions[0].Label != "x" {
		t.Errorf("record %s (%v): want s7 alone", lines[0], err)
	}
	got, _ := loaded(t, dir)
	if len(got.Sessions) != 999 {
		t.Errorf("%d sessions read back, want 999", len(got.Sessions))
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Errorf("%d files in the state dir, want 2 (the snapshot, the journal)", len(entries))
	}
}
