package report

import (
	"encoding/json"
	"math"
	"slices"
	"strconv"

	"github.com/lineage-dev/lineage/internal/record"
	"github.com/lineage-dev/lineage/lineage"
)

// The trace's events are encoded by hand, byte for byte as encoding/json's
// Encoder would (the golden test holds them to it): reflection was half of
// the chrome-trace format's time. Anything unusual — a string that needs
// escaping, a float in exponent form, a value of another type — is left to
// encoding/json.

// appendEvent appends ev as one JSON line.
func appendEvent(b []byte, ev *traceEvent) ([]byte, error) {
	var err error
	b = append(b, `{"name":`...)
	b = record.AppendJSONString(b, ev.Name)
	if ev.Cat != "" {
		b = append(b, `,"cat":`...)
		b = record.AppendJSONString(b, ev.Cat)
	}
	b = append(b, `,"ph":`...)
	b = record.AppendJSONString(b, ev.Ph)
	b = append(b, `,"ts":`...)
	if b, err = appendFloat(b, ev.TS); err != nil {
		return b, err
	}
	if ev.Dur != nil {
		b = append(b, `,"dur":`...)
		if b, err = appendFloat(b, *ev.Dur); err != nil {
			return b, err
		}
	}
	b = append(b, `,"pid":`...)
	b = strconv.AppendUint(b, uint64(ev.PID), 10)
	b = append(b, `,"tid":`...)
	b = strconv.AppendInt(b, int64(ev.TID), 10)
	if ev.ID != 0 {
		b = append(b, `,"id":`...)
		b = strconv.AppendInt(b, int64(ev.ID), 10)
	}
	if ev.BP != "" {
		b = append(b, `,"bp":`...)
		b = record.AppendJSONString(b, ev.BP)
	}
	if len(ev.Args) > 0 {
		b = append(b, `,"args":`...)
		if b, err = appendArgs(b, ev.Args); err != nil {
			return b, err
		}
	}
	return append(b, "}\n"...), nil
}

// appendArgs appends a map as encoding/json does: keys in sorted order.
func appendArgs(b []byte, args map[string]any) ([]byte, error) {
	keys := make([]string, 0, len(args))
	for k := range args {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var err error
	for i, k := range keys {
		if i == 0 {
			b = append(b, '{')
		} else {
			b = append(b, ',')
		}
		b = record.AppendJSONString(b, k)
		b = append(b, ':')
		if b, err = appendValue(b, args[k]); err != nil {
			return b, err
		}
	}
	return append(b, '}'), nil
}

func appendValue(b []byte, v any) ([]byte, error) {
	switch v := v.(type) {
	case string:
		return record.AppendJSONString(b, v), nil
	case lineage.Result:
		return record.AppendJSONString(b, string(v)), nil
	case int:
		return strconv.AppendInt(b, int64(v), 10), nil
	case uint32:
		return strconv.AppendUint(b, uint64(v), 10), nil
	case uint64:
		return strconv.AppendUint(b, v, 10), nil
	case bool:
		return strconv.AppendBool(b, v), nil
	case []string:
		if v == nil {
			return append(b, "null"...), nil
		}
		b = append(b, '[')
		for i, s := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = record.AppendJSONString(b, s)
		}
		return append(b, ']'), nil
	}
	raw, err := json.Marshal(v)
	return append(b, raw...), err
}

// appendFloat appends f as encoding/json does; the exponent form is left
// to it.
func appendFloat(b []byte, f float64) ([]byte, error) {
	if abs := math.Abs(f); f == 0 || (abs >= 1e-6 && abs < 1e21) {
		return strconv.AppendFloat(b, f, 'f', -1, 64), nil
	}
	raw, err := json.Marshal(f)
	return append(b, raw...), err
}
