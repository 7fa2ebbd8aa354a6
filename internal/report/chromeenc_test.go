package report

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

// TestAppendEventIsEncodingJSON holds the hand encoder to encoding/json's
// Encoder, byte for byte, on the unusual as well as the usual.
func TestAppendEventIsEncodingJSON(t *testing.T) {
	dur, tiny, huge, neg := 12.5, 1e-7, 1e22, -0.0
	evs := []traceEvent{
		{Name: "plain", Ph: "X", TS: 0, Dur: &dur, PID: 1, TID: 2},
		{Name: "a<b>&\"c\"\\\n\x01é\u2028\xff", Cat: "leaked", Ph: "s", TS: tiny, Dur: &huge, PID: 4294967295, TID: -1, ID: 7, BP: "e"},
		{Name: "m", Ph: "M", TS: neg, Args: map[string]any{"name": "x <y>", "sort_index": 3}},
		{Name: "args", Ph: "X", TS: 123456.789, Args: map[string]any{
			"pid": uint32(5), "start": uint64(1 << 63), "argv": []string(nil), "signals": []string{"TERM", "<KILL>"},
			"outcome": lineage.Killed, "leaked": true, "end": "exit 0", "other": 1.5, "empty": []string{},
		}},
	}
	for _, ev := range evs {
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(ev); err != nil {
			t.Fatal(err)
		}
		got, err := appendEvent(nil, &ev)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want.Bytes()) {
			t.Errorf("\ngot  %s\nwant %s", got, want.Bytes())
		}
	}
}
