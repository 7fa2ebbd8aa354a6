package record

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/lineage-dev/lineage/lineage"
)

// MaxLine is the longest line a Reader accepts; a longer one is skipped as
// a problem. The tracker cuts argv well below it.
const MaxLine = 1 << 20

// MaxProblems is how many problems a Reader keeps; it counts the rest.
const MaxProblems = 100

// Problem is a line of a record that could not be read, or a fact about the
// record that limits what can be known from it.
type Problem struct {
	// Line is the 1-based line number; 0 for the record as a whole.
	Line int    `json:"line,omitempty"`
	What string `json:"what"`
	// Header is set for a problem with the record's header (none, or a
	// schema it doesn't name): the line may still be read, as an event.
	Header bool `json:"header,omitempty"`
}

func (p Problem) String() string {
	if p.Line == 0 {
		return p.What
	}
	return fmt.Sprintf("line %d: %s", p.Line, p.What)
}

// Reader reads a record line by line, in constant memory whatever the
// record's size. It skips what it can't read and keeps a [Problem] for it;
// it never panics on bad input. A Reader is for one goroutine.
type Reader struct {
	br       *bufio.Reader
	line     int
	header   Header
	found    bool // a header was read
	pending  *Event
	problems []Problem
	dropped  int // problems beyond MaxProblems
	events   int
}

// NewReader reads the header of the record in r. The only errors are for a
// record that has nothing in it, for a file that is one indented JSON
// document rather than a record (a `lineage run --report` file, which it
// names), and for a read that fails; the first two wrap
// lineage.ErrInvalid. A missing, damaged or newer header is a Problem, and
// reading goes on.
func NewReader(r io.Reader) (*Reader, error) {
	rd := &Reader{br: bufio.NewReaderSize(r, 64<<10)}
	for {
		raw, cut, err := rd.readLine()
		if err == io.EOF {
			return nil, fmt.Errorf("%w record: empty: no header and no events", lineage.ErrInvalid)
		}
		if err != nil {
			return nil, err
		}
		if raw == nil || len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if err := rd.document(raw); err != nil {
			return nil, err
		}
		rd.first(raw, cut)
		return rd, nil
	}
}

// document refuses a file whose first line opens an indented JSON
// document: a record has one JSON object per line, so this is no record.
// A run report (`lineage run --report`) is named as one.
func (r *Reader) document(first []byte) error {
	if string(bytes.TrimSpace(first)) != "{" {
		return nil
	}
	rest, _ := r.br.Peek(64 << 10)
	if bytes.Contains(rest, []byte(`"decision":`)) && bytes.Contains(rest, []byte(`"backend":`)) {
		return fmt.Errorf("%w record: this is a run report (lineage run --report), not a record: lineage report renders a record, made with lineage run --record FILE or lineage serve --record-dir", lineage.ErrInvalid)
	}
	return fmt.Errorf("%w record: this is one indented JSON document, not a record (one JSON object a line): lineage report renders a record, made with lineage run --record FILE or lineage serve --record-dir", lineage.ErrInvalid)
}

// first reads the first non-empty line: the header, or else an event.
func (r *Reader) first(raw []byte, cut bool) {
	var h Header
	if json.Unmarshal(raw, &h) == nil && h.Schema != "" {
		r.header, r.found = h, true
		r.checkHeader()
		return
	}
	r.headerProblem("no header: the schema version is taken to be %d and the host is unknown", SchemaVersion)
	r.header.Version = SchemaVersion
	if ev, ok := r.decode(raw, cut); ok {
		r.pending = &ev
	}
}

func (r *Reader) checkHeader() {
	switch h := r.header; {
	case h.Schema != SchemaName:
		r.headerProblem("schema %q is not %q: read as %s version %d", h.Schema, SchemaName, SchemaName, SchemaVersion)
	case h.Version > SchemaVersion:
		r.headerProblem("schema version %d is newer than this lineage reads (%d): fields and event kinds it doesn't know are left out", h.Version, SchemaVersion)
	case h.Version < 1:
		r.headerProblem("schema version %d is not a version: read as %d", h.Version, SchemaVersion)
	}
}

// Header returns the record's header; its zero value when the record has
// none (see [Reader.HasHeader]).
func (r *Reader) Header() Header { return r.header }

// HasHeader reports whether the record began with a header.
func (r *Reader) HasHeader() bool { return r.found }

// Next returns the next event that could be read, skipping (and keeping a
// Problem for) any line that could not. It returns io.EOF at the end.
func (r *Reader) Next() (Event, error) {
	if ev := r.pending; ev != nil {
		r.pending = nil
		r.events++
		return *ev, nil
	}
	for {
		raw, cut, err := r.readLine()
		if err != nil {
			return Event{}, err
		}
		if raw == nil || len(bytes.TrimSpace(raw)) == 0 {
			continue
		}
		if ev, ok := r.decode(raw, cut); ok {
			r.events++
			return ev, nil
		}
	}
}

// Events returns how many events Next has returned so far.
func (r *Reader) Events() int { return r.events }

// Problems returns what could not be read so far, in line order, at most
// MaxProblems of them; Dropped counts the others.
func (r *Reader) Problems() []Problem { return r.problems }

// Dropped returns how many problems were not kept.
func (r *Reader) Dropped() int { return r.dropped }

func (r *Reader) problem(line int, format string, args ...any) {
	r.keep(Problem{Line: line, What: fmt.Sprintf(format, args...)})
}

// headerProblem keeps a problem with the header, on the current line.
func (r *Reader) headerProblem(format string, args ...any) {
	r.keep(Problem{Line: r.line, What: fmt.Sprintf(format, args...), Header: true})
}

// keep keeps p, or counts it as dropped past MaxProblems.
func (r *Reader) keep(p Problem) {
	if len(r.problems) >= MaxProblems {
		r.dropped++
		return
	}
	r.problems = append(r.problems, p)
}

// readLine returns the next line without its newline, and whether the
// record ended in the middle of it. A line longer than MaxLine is skipped
// (raw nil) as a problem. Errors are io.EOF or the underlying reader's.
func (r *Reader) readLine() (raw []byte, cut bool, err error) {
	var buf []byte
	long := false
	for {
		part, err := r.br.ReadSlice('\n')
		if !long && len(buf)+len(part) <= MaxLine {
			buf = append(buf, part...)
		} else {
			long, buf = true, nil
		}
		switch {
		case err == nil || (err == io.EOF && (long || len(buf) > 0)):
			r.line++
			if long {
				r.problem(r.line, "longer than %d bytes: skipped, the event on it is lost", MaxLine)
				return nil, err == io.EOF, nil
			}
			return bytes.TrimSuffix(buf, []byte("\n")), err == io.EOF, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF:
			return nil, false, io.EOF
		default:
			return nil, false, fmt.Errorf("read record: line %d: %w", r.line+1, err)
		}
	}
}
