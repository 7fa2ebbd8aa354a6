package record

import (
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// decodeFast decodes an event line the way lineage writes it, several times
// faster than encoding/json. It reports false for any line it does not read
// exactly as encoding/json would — a key it doesn't know or sees twice, a
// null, a key not in lower case, a number with a fraction, invalid JSON —
// and the caller then decodes that line with encoding/json, which has the
// last word. FuzzDecodeFast holds the two to the same result.
func decodeFast(raw []byte) (Event, bool) {
	s := scanner{b: raw}
	var ev Event
	var seen uint32
	ok := s.object(func(key []byte) bool {
		bit := fieldBit(key)
		if bit == 0 || seen&bit != 0 {
			return false
		}
		seen |= bit
		return ev.field(&s, string(key))
	})
	return ev, ok && s.end()
}

// fieldBit numbers the Event's JSON keys, to catch one seen twice; 0 for
// a key it doesn't know.
func fieldBit(key []byte) uint32 {
	for i, k := range fieldKeys {
		if string(key) == k {
			return 1 << i
		}
	}
	return 0
}

var fieldKeys = [...]string{"kind", "boot_ns", "wall", "process", "parent", "root", "comm",
	"is_root", "untracked", "contained", "exe", "argv", "argv_truncated", "redacted",
	"uid", "euid", "exit", "signal", "reason", "result", "count"}

// field reads the value of key into ev.
func (ev *Event) field(s *scanner, key string) bool {
	var ok bool
	switch key {
	case "kind":
		ev.Kind, ok = s.kind()
	case "boot_ns":
		var n int64
		n, ok = s.int64()
		ev.Boot = durationOf(n)
	case "wall":
		tok, _, tokOK := s.token()
		ok = tokOK && ev.Wall.UnmarshalJSON(tok) == nil
	case "process":
		ev.Process, ok = s.identity()
	case "parent":
		ev.Parent, ok = s.identity()
	case "root":
		ev.Root, ok = s.identity()
	case "comm":
		ev.Comm, ok = s.str()
	case "exe":
		ev.Exe, ok = s.str()
	case "signal":
		ev.Signal, ok = s.str()
	case "reason":
		ev.Reason, ok = s.str()
	case "result":
		ev.Result, ok = s.str()
	case "argv":
		ev.Argv, ok = s.strings()
	case "uid":
		ev.UID, ok = s.uint32p()
	case "euid":
		ev.EUID, ok = s.uint32p()
	case "exit":
		ev.Exit, ok = s.exit()
	case "count":
		ev.Count, ok = s.uint(64)
	default:
		return ev.flag(s, key)
	}
	return ok
}

// flag reads the value of a boolean key into ev.
func (ev *Event) flag(s *scanner, key string) bool {
	v, ok := s.boolean()
	switch key {
	case "is_root":
		ev.IsRoot = v
	case "untracked":
		ev.Untracked = v
	case "contained":
		ev.Contained = v
	case "argv_truncated":
		ev.ArgvTruncated = v
	case "redacted":
		ev.Redacted = v
	default:
		return false
	}
	return ok
}

// kind reads a kind, without allocating for the known ones.
func (s *scanner) kind() (Kind, bool) {
	tok, plain, ok := s.token()
	if !ok || !plain {
		return "", false
	}
	switch k := Kind(tok[1 : len(tok)-1]); k {
	case KindFork, KindExec, KindExit, KindSignal, KindKeep, KindUnkeep, KindLeak, KindLoss, KindEnd:
		return k, true
	}
	return Kind(string(tok[1 : len(tok)-1])), true
}

// identity reads {"pid":N,"start":N}, the form the Writer writes, at
// once, and any other form key by key.
func (s *scanner) identity() (lineage.Identity, bool) {
	const pidKey, startKey = `{"pid":`, `,"start":`
	s.ws()
	if at := s.i; len(s.b)-at > len(pidKey) && string(s.b[at:at+len(pidKey)]) == pidKey {
		s.i += len(pidKey)
		pid, ok := s.uint(32)
		if ok && len(s.b)-s.i > len(startKey) && string(s.b[s.i:s.i+len(startKey)]) == startKey {
			s.i += len(startKey)
			start, ok := s.uint(64)
			if ok && s.next('}') {
				return lineage.Identity{PID: uint32(pid), StartTicks: start}, true
			}
		}
		s.i = at
	}
	var id lineage.Identity
	var seen [2]bool
	ok := s.object(func(key []byte) bool {
		var ok bool
		var n uint64
		switch string(key) {
		case "pid":
			n, ok = s.uint(32)
			id.PID, ok = uint32(n), ok && !seen[0]
			seen[0] = true
		case "start":
			id.StartTicks, ok = s.uint(64)
			ok = ok && !seen[1]
			seen[1] = true
		}
		return ok
	})
	return id, ok
}

func (s *scanner) exit() (*Exit, bool) {
	var e Exit
	var seen [3]bool
	ok := s.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "code":
			var n int64
			n, ok = s.int64()
			c := int(n)
			e.Code, ok = &c, ok && !seen[0]
			seen[0] = true
		case "signal":
			e.Signal, ok = s.str()
			ok = ok && !seen[1]
			seen[1] = true
		case "core":
			e.Core, ok = s.boolean()
			ok = ok && !seen[2]
			seen[2] = true
		}
		return ok
	})
	return &e, ok
}

func (s *scanner) uint32p() (*uint32, bool) {
	n, ok := s.uint(32)
	v := uint32(n)
	return &v, ok
}

func durationOf(n int64) time.Duration { return time.Duration(n) }
