package store

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"syscall"

	"github.com/lineage-dev/lineage/api"
)

// JournalName is the journal's name in the state directory, beside the
// snapshot: one record a line (NDJSON), one record a save.
const JournalName = "state.journal"

// The journal is compacted into a snapshot once an append would take it
// past journalRatio times the last snapshot, and never below journalFloor.
// At 4, the snapshots a busy daemon writes add at most a quarter to the
// bytes it appends, and a restart reads at most five snapshots' worth. The
// floor keeps a small state (a snapshot of a few KiB) from being rewritten
// every few dozen registrations: 256 KiB holds hundreds of them (a
// registration's record is about 400 bytes), replayed in a millisecond or
// two.
const (
	journalRatio = 4
	journalFloor = 256 << 10
)

// journalRecord is one save's changes, its sessions as views (read back)
// or as the bytes of their views (written). Seq counts saves across
// snapshots and journals: each record's is one more than the last written.
type journalRecord[S any] struct {
	Seq uint64 `json:"seq"`
	// NextID is set when it changed.
	NextID *int `json:"next_id,omitempty"`
	// Sessions are the views of the open sessions that changed, whole.
	Sessions []S `json:"sessions,omitempty"`
	// Removed are the ids of the sessions gone (closed).
	Removed []string `json:"removed,omitempty"`
}

// onDisk is what the state directory holds, as this server last wrote it
// (views, nextID) or read it (seq).
type onDisk struct {
	views  map[string][]byte // each open session's view as written
	nextID int
	seq    uint64 // the last sequence written or read back
	// journal is open for appending; nil before the first write (which
	// writes a snapshot), after a failed append and after close.
	journal  *os.File
	size     int64 // the journal's bytes
	snapshot int64 // the last snapshot's bytes
	// unwritten is set when views hold changes no file has: an append or
	// a snapshot failed. The next save, or the close, writes a snapshot.
	unwritten bool
	closed    bool // after close, every write is a snapshot alone
}

// save writes c: an append of what it changes, or a snapshot when no
// journal is open, an earlier write failed, or the append would take the
// journal past its bound. The views are updated first, so that a write
// that fails leaves them as the next snapshot must write them. Call with
// f.mu held.
func (f *Store) save(c Change) error {
	d := &f.disk
	rec, changed := d.apply(c)
	if !changed && !d.unwritten {
		return nil
	}
	if d.journal == nil || d.unwritten {
		return f.compact()
	}
	rec.Seq = d.seq + 1
	line, err := json.Marshal(rec)
	if err != nil {
		d.unwritten = true
		return err
	}
	line = append(line, '\n')
	if d.size+int64(len(line)) > max(journalFloor, journalRatio*d.snapshot) {
		return f.compact()
	}
	n, err := d.journal.Write(line)
	d.size += int64(n)
	if err != nil {
		// Part of the line may be written: the next save writes a
		// snapshot and starts a new journal rather than append to a torn
		// line.
		d.journal.Close()
		d.journal = nil
		d.unwritten = true
		return fmt.Errorf("append to %s: %w", JournalName, err)
	}
	d.seq = rec.Seq
	return nil
}

// apply takes c into the views and returns the record of what it changes,
// its sessions in id order; changed is false when it changes nothing.
func (d *onDisk) apply(c Change) (rec journalRecord[json.RawMessage], changed bool) {
	if d.views == nil {
		d.views = make(map[string][]byte, len(c.Views))
	}
	for _, id := range slices.Sorted(maps.Keys(c.Views)) {
		if old, ok := d.views[id]; !ok || !bytes.Equal(old, c.Views[id]) {
			rec.Sessions = append(rec.Sessions, c.Views[id])
			d.views[id] = c.Views[id]
		}
	}
	slices.Sort(c.Removed)
	for _, id := range c.Removed {
		if _, ok := d.views[id]; ok {
			rec.Removed = append(rec.Removed, id)
			delete(d.views, id)
		}
	}
	if c.NextID != d.nextID {
		rec.NextID = &c.NextID
		d.nextID = c.NextID
	}
	return rec, len(rec.Sessions) > 0 || len(rec.Removed) > 0 || rec.NextID != nil
}

// compact writes the views as a new snapshot, then starts an empty
// journal. The old journal's records are all in the snapshot: a crash
// between the rename and the journal's removal leaves them beside a
// snapshot whose seq skips them. Call with f.mu held.
func (f *Store) compact() error {
	d := &f.disk
	st := snapshot[json.RawMessage]{Version: stateVersion, Boot: f.boot, NextID: d.nextID, Seq: d.seq + 1, Sessions: []json.RawMessage{}}
	for _, id := range slices.Sorted(maps.Keys(d.views)) {
		st.Sessions = append(st.Sessions, d.views[id])
	}
	d.unwritten = true
	data, err := json.Marshal(st)
	if err != nil {
		return err
	}
	// One temporary name will do: writes are serialised by mu.
	tmp := filepath.Join(f.dir, SnapshotName+".tmp")
	if err := writeFile(tmp, append(data, '\n')); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, filepath.Join(f.dir, SnapshotName)); err != nil {
		os.Remove(tmp)
		return err
	}
	d.seq, d.snapshot, d.unwritten = st.Seq, int64(len(data)+1), false
	return f.resetJournal()
}

// resetJournal closes and removes the journal and, unless the state is
// closed, creates an empty one, mode 0600, never through a symbolic link.
// Call with f.mu held.
func (f *Store) resetJournal() error {
	d := &f.disk
	if d.journal != nil {
		d.journal.Close()
		d.journal = nil
	}
	path := filepath.Join(f.dir, JournalName)
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("reset journal: %w", err)
	}
	if d.closed {
		return nil
	}
	j, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return fmt.Errorf("reset journal: %w", err)
	}
	d.journal, d.size = j, 0
	return nil
}

// Close compacts the journal into a snapshot and closes it, so that a
// daemon stopped cleanly leaves one snapshot; a write after close writes a
// snapshot alone. With no journal open and nothing unwritten (nothing
// written yet), the files stay as they are: they hold the last save.
func (f *Store) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.disk.closed = true
	if f.disk.journal == nil && !f.disk.unwritten {
		return nil
	}
	return f.compact()
}

// readJournal reads the journal at path written after a snapshot whose seq
// is seq: its records after the snapshot's, in order, and the last
// sequence it holds (seq when none is later). A torn last line (an append
// a crash cut short) is left out, with a note; any other line that doesn't
// read, or a sequence that doesn't follow, is an error naming the file and
// the line.
func readJournal(path string, seq uint64, note func(string, ...any)) ([]journalRecord[api.Session], uint64, error) {
	data, err := readOwnFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, seq, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read journal: %w", err)
	}
	var recs []journalRecord[api.Session]
	var prev uint64
	for n := 1; len(data) > 0; n++ {
		line, rest, complete := bytes.Cut(data, []byte{'\n'})
		data = rest
		if !complete {
			note("lineage: %s: line %d is torn (a write cut short by a crash): ignored\n", path, n)
			break
		}
		var rec journalRecord[api.Session]
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, 0, fmt.Errorf("read journal: %s line %d: %w", path, n, err)
		}
		// Records follow one another; the first may be one the snapshot
		// holds already (a crash before the journal was reset) or the
		// snapshot's next.
		want := prev + 1
		if prev == 0 {
			want = max(1, min(rec.Seq, seq+1))
		}
		if rec.Seq != want {
			return nil, 0, fmt.Errorf("read journal: %s line %d: sequence %d, want %d: the journal does not follow the snapshot (remove it to start from the snapshot alone)", path, n, rec.Seq, want)
		}
		prev = rec.Seq
		if rec.Seq > seq {
			recs = append(recs, rec)
		}
	}
	return recs, max(prev, seq), nil
}

// replay applies recs to st in order: a session's last view wins, a
// removal drops it. Sessions come out in id order.
func replay(st *snapshot[api.Session], recs []journalRecord[api.Session]) {
	byID := make(map[string]api.Session, len(st.Sessions))
	for _, se := range st.Sessions {
		byID[se.ID] = se
	}
	for _, rec := range recs {
		for _, se := range rec.Sessions {
			byID[se.ID] = se
		}
		for _, id := range rec.Removed {
			delete(byID, id)
		}
		if rec.NextID != nil {
			st.NextID = *rec.NextID
		}
	}
	st.Sessions = make([]api.Session, 0, len(byID))
	for _, id := range slices.Sorted(maps.Keys(byID)) {
		st.Sessions = append(st.Sessions, byID[id])
	}
}
