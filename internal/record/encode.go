package record

import (
	"encoding/json"
	"strconv"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// appendEvent appends ev as json.Marshal would write it, without
// reflection: the Writer runs on the tracker's event reader, beside the
// job. It reports false for what it leaves to json.Marshal (a wall time
// outside years 0–9999, a loss's span or members). Strings that need
// escaping are quoted by encoding/json; TestAppendEventIsMarshal holds the
// two to the same bytes.
func appendEvent(b []byte, ev *Event) ([]byte, bool) {
	if y := ev.Wall.Year(); y < 0 || y > 9999 {
		return b, false
	}
	// A loss's span and members are rare: json.Marshal writes them.
	if ev.From != 0 || ev.To != 0 || len(ev.Members) > 0 || ev.MembersOmitted != 0 {
		return b, false
	}
	b = append(b, `{"kind":`...)
	b = AppendJSONString(b, string(ev.Kind))
	b = append(b, `,"boot_ns":`...)
	b = strconv.AppendInt(b, int64(ev.Boot), 10)
	b = append(b, `,"wall":"`...)
	b = ev.Wall.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = appendIdentity(b, `,"process":`, ev.Process)
	b = appendIdentity(b, `,"parent":`, ev.Parent)
	b = appendIdentity(b, `,"root":`, ev.Root)
	b = appendOptString(b, `,"comm":`, ev.Comm)
	b = appendOptBool(b, `,"is_root":true`, ev.IsRoot)
	b = appendOptBool(b, `,"untracked":true`, ev.Untracked)
	b = appendOptBool(b, `,"contained":true`, ev.Contained)
	b = appendOptString(b, `,"exe":`, ev.Exe)
	if len(ev.Argv) > 0 {
		b = append(b, `,"argv":[`...)
		for i, a := range ev.Argv {
			if i > 0 {
				b = append(b, ',')
			}
			b = AppendJSONString(b, a)
		}
		b = append(b, ']')
	}
	b = appendOptBool(b, `,"argv_truncated":true`, ev.ArgvTruncated)
	b = appendOptBool(b, `,"redacted":true`, ev.Redacted)
	b = appendOptUint32(b, `,"uid":`, ev.UID)
	b = appendOptUint32(b, `,"euid":`, ev.EUID)
	if e := ev.Exit; e != nil {
		b = appendExit(b, e)
	}
	b = appendOptString(b, `,"signal":`, ev.Signal)
	b = appendOptString(b, `,"reason":`, ev.Reason)
	b = appendOptString(b, `,"result":`, ev.Result)
	if ev.Count != 0 {
		b = append(b, `,"count":`...)
		b = strconv.AppendUint(b, ev.Count, 10)
	}
	return append(b, '}'), true
}

func appendIdentity(b []byte, key string, id lineage.Identity) []byte {
	b = append(b, key...)
	b = append(b, `{"pid":`...)
	b = strconv.AppendUint(b, uint64(id.PID), 10)
	b = append(b, `,"start":`...)
	b = strconv.AppendUint(b, id.StartTicks, 10)
	return append(b, '}')
}

func appendExit(b []byte, e *Exit) []byte {
	b = append(b, `,"exit":{`...)
	sep := ""
	if e.Code != nil {
		b = append(b, `"code":`...)
		b = strconv.AppendInt(b, int64(*e.Code), 10)
		sep = ","
	}
	if e.Signal != "" {
		b = append(b, sep+`"signal":`...)
		b = AppendJSONString(b, e.Signal)
		sep = ","
	}
	if e.Core {
		b = append(b, sep+`"core":true`...)
	}
	return append(b, '}')
}

func appendOptString(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return AppendJSONString(append(b, key...), s)
}

func appendOptBool(b []byte, field string, v bool) []byte {
	if !v {
		return b
	}
	return append(b, field...)
}

func appendOptUint32(b []byte, key string, v *uint32) []byte {
	if v == nil {
		return b
	}
	return strconv.AppendUint(append(b, key...), uint64(*v), 10)
}

// AppendJSONString appends s as a JSON string, exactly as encoding/json
// writes it (HTML characters escaped too); it is the fast path of the
// record's and the reports' encoders.
func AppendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			raw, _ := json.Marshal(s) // a string always encodes
			return append(b, raw...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}
