package server

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/internal/server/store"
	"github.com/lineage-dev/lineage/internal/tracker"
	"github.com/lineage-dev/lineage/lineage"
)

// DefaultRecordKeep is how many record files a record directory keeps
// unless told otherwise.
const DefaultRecordKeep = 100

// DefaultRecordMaxBytes bounds each record file unless told otherwise.
const DefaultRecordMaxBytes = 1 << 30

// RecordOptions ask for one forensic record per session (docs/record.md).
// The zero value records nothing.
type RecordOptions struct {
	// Dir receives the records, one file per session, named
	// <opened, UTC>-u<uid>-<session>.jsonl, uid the session's opener's;
	// it is created (0700) if missing, and must be the daemon's alone
	// (owned by its uid, writable by no one else). Files are created
	// 0600, owned by the daemon's user, never through a symbolic link.
	Dir string
	// Keep bounds the files of each uid in Dir: past it, the oldest files
	// of that uid's closed sessions (this daemon's or an earlier one's)
	// are removed first, so one uid's closes never remove another's
	// records. The file of an open session is never removed. Zero means
	// [DefaultRecordKeep].
	Keep int
	// MaxBytes bounds each file: once it holds that many bytes, the
	// session's later events are not written, only counted, and the
	// record closes with that count as a loss, so that no session, however
	// many processes it starts, fills the disk. Zero means
	// [DefaultRecordMaxBytes].
	MaxBytes uint64
	// Redact, if set, masks matching parts of argv words before they are
	// written.
	Redact *regexp.Regexp
}

// recordName matches the names of the files a record directory holds, the
// session's uid in its group 1; a name without one (an earlier daemon's)
// counts as root's.
var recordName = regexp.MustCompile(`^\d{8}T\d{6}\.\d{9}Z-(?:u(\d{1,10})-)?[A-Za-z0-9][A-Za-z0-9._-]{0,63}\.jsonl$`)

// recordUID is the uid a record's name gives, and whether it is a record's.
func recordUID(name string) (uint32, bool) {
	m := recordName.FindStringSubmatch(name)
	if m == nil {
		return 0, false
	}
	if m[1] == "" {
		return 0, true
	}
	uid, err := strconv.ParseUint(m[1], 10, 32)
	return uint32(uid), err == nil
}

// recordBuffer is how many events may wait for the record writer before
// the next ones are counted as a loss.
const recordBuffer = 8192

// records writes each session's events to a file of its own, from one
// goroutine that owns the files: events arrive from the hub, closes from
// closeLater. Each session holds one of its uid's open records (the
// Records quota) from its open until its record is closed.
type records struct {
	s        *Server
	dir      *os.File
	keep     int
	maxBytes uint64
	sub      *subscriber
	ctl      chan recordClose
	done     chan struct{}
	open     map[string]*sessionRecord

	// closing counts, per session, the closes not yet carried out, and
	// names the uid of the last: a session that closed before its first
	// event reached the writer still gets its record. Guarded by mu,
	// never held across I/O.
	mu      sync.Mutex
	closing map[string]closingRecord
}

// recordClose is a close carried out: the session and its uid.
type recordClose struct {
	session string
	uid     uint32
}

// closingRecord is the closes of one session not yet carried out.
type closingRecord struct {
	n   int
	uid uint32
}

// sessionRecord is one session's open record.
type sessionRecord struct {
	w    *record.Writer
	file *countingFile
	name string
	uid  uint32
	// unwritten counts the items not written once the file was full.
	unwritten uint64
	// base is the backend's counters when the record began: its losses
	// are what they grew by until it closes; gaps is where the backend's
	// lost events stood then, when it places them (placed).
	base   loader.Stats
	gaps   loader.GapMark
	placed bool
	// roots are the lineages the record has events of: the lost events
	// it names are theirs.
	roots map[lineage.Identity]bool
}

// full reports whether the record's file holds max bytes or more.
func (sr *sessionRecord) full(max uint64) bool { return sr.file.n >= max }

// countingFile is a record's file, counting the bytes written to it; it
// is written from the records goroutine alone.
type countingFile struct {
	f *os.File
	n uint64
}

func (c *countingFile) Write(b []byte) (int, error) {
	n, err := c.f.Write(b)
	c.n += uint64(n)
	return n, err
}

func (c *countingFile) Close() error { return c.f.Close() }

// openRecords opens the record directory and starts writing records, if
// Options.Record names one.
func (s *Server) openRecords() error {
	o := s.opts.Record
	if o.Dir == "" {
		return nil
	}
	if o.Keep < 0 {
		return fmt.Errorf("%w option: record keep %d: must be positive", lineage.ErrInvalid, o.Keep)
	}
	if err := store.PrivateDir(o.Dir, "record dir"); err != nil {
		return err
	}
	fd, err := unix.Open(o.Dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("record dir %s: %w", o.Dir, err)
	}
	r := &records{
		s: s, dir: os.NewFile(uintptr(fd), o.Dir), keep: o.Keep, maxBytes: o.MaxBytes,
		sub: s.hub.subscribeSize("", recordBuffer),
		ctl: make(chan recordClose), done: make(chan struct{}),
		open: make(map[string]*sessionRecord), closing: make(map[string]closingRecord),
	}
	if r.keep == 0 {
		r.keep = DefaultRecordKeep
	}
	if r.maxBytes == 0 {
		r.maxBytes = DefaultRecordMaxBytes
	}
	s.records = r
	go r.run()
	return nil
}

// run writes events as they come, until the hub closes; then it closes
// every record.
func (r *records) run() {
	defer close(r.done)
	defer r.dir.Close()
	for {
		select {
		case it, ok := <-r.sub.ch:
			if !ok {
				for id := range r.open {
					r.finish(id)
				}
				return
			}
			if n := r.s.hub.takeLost(r.sub); n > 0 {
				for _, sr := range r.open {
					if sr.full(r.maxBytes) {
						continue // its own bound's loss says more was not written
					}
					_ = sr.w.LossOf(n, "behind: the record writer fell behind and dropped events of any session")
				}
			}
			r.write(it)
		case c := <-r.ctl:
			r.finish(c.session)
			r.prune(c.uid)
			r.closed(c)
		}
	}
}

// write writes one item to its session's record, opening it first.
func (r *records) write(it item) {
	if it.session == "" {
		return
	}
	sr := r.open[it.session]
	if sr == nil {
		uid, open := r.s.sessionUID(it.session)
		if !open {
			if uid, open = r.closingUID(it.session); !open {
				return // a closed session's late events
			}
		}
		var err error
		if sr, err = r.create(it.session, uid); err != nil {
			r.s.note("lineage: record of session %s: %v\n", it.session, err)
			return
		}
		r.open[it.session] = sr
		r.prune(uid)
	}
	if !it.root.IsZero() {
		sr.roots[it.root] = true
	}
	if sr.full(r.maxBytes) {
		sr.unwritten++
		return
	}
	if err := it.write(sr.w); err != nil {
		r.s.note("lineage: record of session %s: %v\n", it.session, err)
	}
}

// create opens a new record for session, relative to the directory and
// never through a symbolic link, and writes its header.
func (r *records) create(session string, uid uint32) (*sessionRecord, error) {
	name := time.Now().UTC().Format("20060102T150405.000000000Z") + "-u" + strconv.FormatUint(uint64(uid), 10) + "-" + session + ".jsonl"
	fd, err := unix.Openat(int(r.dir.Fd()), name, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create %s: %w", name, err)
	}
	f := &countingFile{f: os.NewFile(uintptr(fd), filepath.Join(r.dir.Name(), name))}
	h := r.s.tracker.RecordHeader(nil)
	h.Session = session
	w, err := record.NewFileWriter(f, h, &record.Options{Redact: r.s.opts.Record.Redact})
	if err != nil {
		return nil, err
	}
	sr := &sessionRecord{w: w, file: f, name: name, uid: uid, roots: map[lineage.Identity]bool{}}
	sr.base, _ = r.s.tracker.Stats()
	sr.gaps, sr.placed = r.s.tracker.GapMark()
	return sr, nil
}

// finish writes a record's losses and closes it.
func (r *records) finish(id string) {
	sr := r.open[id]
	if sr == nil {
		return
	}
	delete(r.open, id)
	if sr.unwritten > 0 {
		_ = sr.w.LossOf(sr.unwritten, fmt.Sprintf("bound: the record reached %s (--record-max-bytes); the session's later events were not written", loader.FormatBytes(r.maxBytes)))
	}
	if st, err := r.s.tracker.Stats(); err == nil {
		l := tracker.Losses{Stats: statsSince(st, sr.base)}
		if sr.placed {
			l.Gaps, l.Placed = r.s.tracker.GapsSince(sr.gaps)
		}
		l.Mine = func(ev loader.LostEvent) bool {
			return sr.roots[ev.Root] || (r.s.hub.sessionOf != nil && r.s.hub.sessionOf(ev.Root) == id)
		}
		tracker.WriteLosses(sr.w, l)
	}
	if err := sr.w.Close(); err != nil {
		r.s.note("lineage: record %s: %v\n", sr.name, err)
	}
}

// statsSince is what the loss counters grew by since base.
func statsSince(now, base loader.Stats) loader.Stats {
	return loader.Stats{
		EventsLost:   now.EventsLost - base.EventsLost,
		Undecodable:  now.Undecodable - base.Undecodable,
		MembersFull:  now.MembersFull - base.MembersFull,
		Unattributed: now.Unattributed - base.Unattributed,
	}
}

// prune removes the oldest files of uid's closed sessions while the
// directory holds more than keep records of uid's.
func (r *records) prune(uid uint32) {
	entries, err := r.list()
	if err != nil {
		r.s.note("lineage: record dir: %v\n", err)
		return
	}
	open := make(map[string]bool, len(r.open))
	for _, sr := range r.open {
		open[sr.name] = true
	}
	var closed []string
	total := 0
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		if owner, ok := recordUID(e.Name()); !ok || owner != uid {
			continue
		}
		total++
		if !open[e.Name()] {
			closed = append(closed, e.Name())
		}
	}
	slices.Sort(closed) // the names start with the time they were opened
	for _, name := range closed {
		if total <= r.keep {
			return
		}
		if err := unix.Unlinkat(int(r.dir.Fd()), name, 0); err != nil {
			r.s.note("lineage: record dir: remove %s: %v\n", name, err)
			continue
		}
		total--
	}
}

// list reads the directory through the descriptor opened at the start,
// wherever its path points now.
func (r *records) list() ([]os.DirEntry, error) {
	fd, err := unix.Openat(int(r.dir.Fd()), ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	d := os.NewFile(uintptr(fd), r.dir.Name())
	defer d.Close()
	return d.ReadDir(-1)
}

// closeLater closes session's record once the late events of its roots
// (exits still in the ring buffer when it closed) are through, and counts
// it as closed for uid, its opener.
func (r *records) closeLater(session string, uid uint32) {
	if r == nil {
		return
	}
	r.mu.Lock()
	c := r.closing[session]
	r.closing[session] = closingRecord{n: c.n + 1, uid: uid}
	r.mu.Unlock()
	time.AfterFunc(eventsAfterForget, func() {
		select {
		case r.ctl <- recordClose{session, uid}:
		case <-r.done:
		}
	})
}

// closingUID is the uid of session's last close not yet carried out, if
// one is (none without records).
func (r *records) closingUID(session string) (uint32, bool) {
	if r == nil {
		return 0, false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c, ok := r.closing[session]
	return c.uid, ok
}

// closed counts one close as carried out: its record, if any, is closed.
func (r *records) closed(rc recordClose) {
	r.mu.Lock()
	c := r.closing[rc.session]
	if c.n--; c.n <= 0 {
		delete(r.closing, rc.session)
	} else {
		r.closing[rc.session] = c
	}
	r.mu.Unlock()
	r.s.usage.give(rc.uid, limitRecords, 1)
}

// wait waits for the records to be closed, after the hub closed.
func (r *records) wait() {
	if r != nil {
		<-r.done
	}
}

// sessionUID is the uid of session id, and whether it is open.
func (s *Server) sessionUID(id string) (uint32, bool) {
	s.reg.mu.Lock()
	defer s.reg.mu.Unlock()
	if se, ok := s.reg.sessions[id]; ok {
		return se.uid, true
	}
	return 0, false
}
