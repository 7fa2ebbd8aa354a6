// Package store keeps the sidecar's sessions on disk, in a state
// directory: a snapshot and an append-only journal of the changes after
// it. The server locks the directory ([Lock]), opens it ([Open]), reads it
// back once ([Store.Load]), saves each change ([Store.Save]), and closes
// it ([Store.Close]), which compacts the journal into one snapshot. The
// sessions are stored as the API shows them ([api.Session]): the store
// reads and writes them and knows nothing else of a session.
//
// The directory, and every file in it, is trusted only when it is the
// daemon's own (files.go).
package store

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

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/internal/proc"
)

// stateVersion is the version of the state file's layout.
const stateVersion = 1

// SnapshotName is the snapshot's name in the state directory.
const SnapshotName = "state.json"

// Store keeps the server's state in two files: a snapshot (SnapshotName),
// written to a temporary file and renamed over the last one, and beside it
// a journal (JournalName, journal.go), to which each save appends, in one
// write(2), what changed since the last: the views of the sessions that
// changed, the ids of those gone, the next session number. A save's work
// is what changed: the server marks the sessions it changes, and a save
// marshals those alone; the views last written are kept, as bytes, for the
// next compaction. Both files are compact JSON (jq shows them indented).
// The journal is compacted into a new snapshot when it outgrows its bound,
// when the server starts and when it closes. Saves are serialised by mu,
// in the order their changes were taken ([Store.Save]).
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
// journal, at load (earlierBoot). Dropping the two fsyncs saved 6 to 12
// ms on every registration; appending instead of renaming saves ext4's
// writeback of the renamed file (its auto_da_alloc heuristic) and the
// writing out of every session at every save.
type Store struct {
	dir  string
	boot string // this boot's boot_id, "" when unknown
	// mu serialises the saves; Save takes it before the caller's locks
	// (its take function runs under it), never after.
	mu   sync.Mutex
	disk onDisk // guarded by mu
}

// snapshot is the snapshot's layout, its sessions as views (read back) or
// as the bytes of their views (written).
type snapshot[S any] struct {
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

// State is what a state directory holds, read back: the next session
// number and the open sessions, in id order. Its JSON is the snapshot's,
// less the snapshot's header.
type State struct {
	NextID   int           `json:"next_id"`
	Sessions []api.Session `json:"sessions"`
}

// Change is one save's changes: the views of the sessions that changed,
// marshalled, by id; the ids of those gone; and the next session number.
type Change struct {
	Views   map[string][]byte
	Removed []string
	NextID  int
}

// Open checks the state directory, making it if need be. It takes no
// lock: the server takes the directory's first ([Lock]).
func Open(dir string) (*Store, error) {
	if err := PrivateDir(dir, "state dir"); err != nil {
		return nil, err
	}
	// Until the first save, the files hold no view of this server's.
	return &Store{dir: dir, boot: bootID(), disk: onDisk{unwritten: true}}, nil
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
func (f *Store) earlierBoot(st snapshot[api.Session], parsed bool, written, booted time.Time) bool {
	if parsed && st.Boot != "" && f.boot != "" {
		return st.Boot != f.boot
	}
	return written.Before(booted)
}

// Save writes the change take returns, which it calls with the store's
// lock held, so that saves are written in the order their changes were
// taken. What is written is an append of what the change changes, or a
// snapshot when no journal is open, an earlier write failed, or the append
// would take the journal past its bound. An error of take's is returned
// and nothing is written.
func (f *Store) Save(take func() (Change, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	c, err := take()
	if err != nil {
		return err
	}
	return f.save(c)
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

// earlierBootSuffix is added to the names of a state set aside.
const earlierBootSuffix = ".earlier-boot"

// Load reads the snapshot and replays the journal over it; ok is false
// when there is no state, or an earlier boot's, set aside (both files
// renamed with the suffix .earlier-boot, and said so to note): its
// processes and pins died with that boot, and its identities, counted in
// ticks since boot, could name this boot's processes. A state that doesn't
// read is an error naming the file (and the journal's line), and nothing is
// changed.
func (f *Store) Load(note func(string, ...any)) (st State, ok bool, err error) {
	snap, ok, err := f.load(note)
	return State{NextID: snap.NextID, Sessions: snap.Sessions}, ok, err
}

func (f *Store) load(note func(string, ...any)) (st snapshot[api.Session], ok bool, err error) {
	path := filepath.Join(f.dir, SnapshotName)
	data, err := readOwnFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return st, false, fmt.Errorf("read state: %w", err)
	}
	var perr error
	if exists {
		perr = json.Unmarshal(data, &st)
	}
	if aside, err := f.setAside(st, exists, perr == nil, note); aside || err != nil {
		return snapshot[api.Session]{}, false, err
	}
	if perr != nil {
		return st, false, fmt.Errorf("read state %s: %w (move it aside to start empty)", path, perr)
	}
	if exists && st.Version != stateVersion {
		return st, false, fmt.Errorf("read state %s: version %d: want %d", path, st.Version, stateVersion)
	}
	jpath := filepath.Join(f.dir, JournalName)
	if _, err := os.Lstat(jpath); !exists && err == nil {
		return st, false, fmt.Errorf("read state: %s has no %s beside it: remove it to start empty", jpath, SnapshotName)
	}
	recs, last, err := readJournal(jpath, st.Seq, note)
	if err != nil {
		return st, false, err
	}
	replay(&st, recs)
	f.mu.Lock()
	f.disk.seq = last
	f.mu.Unlock()
	return st, exists, nil
}

// setAside renames the snapshot and the journal with earlierBootSuffix
// when they are from an earlier boot: the snapshot's (st, parsed when it
// reads), or the journal's when there is no snapshot.
func (f *Store) setAside(st snapshot[api.Session], exists, parsed bool, note func(string, ...any)) (bool, error) {
	name := SnapshotName
	if !exists {
		name = JournalName
	}
	info, err := os.Lstat(filepath.Join(f.dir, name))
	if err != nil || !f.earlierBoot(st, parsed, info.ModTime(), time.Now().Add(-proc.BootTime())) {
		return false, nil
	}
	note("lineage: the state in %s is from an earlier boot, whose processes and pins are gone: set aside as %s%s and %s%s\n",
		f.dir, SnapshotName, earlierBootSuffix, JournalName, earlierBootSuffix)
	for _, n := range []string{SnapshotName, JournalName} {
		p := filepath.Join(f.dir, n)
		if err := os.Rename(p, p+earlierBootSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return true, err
		}
	}
	return true, nil
}
