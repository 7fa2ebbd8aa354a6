package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/lineage"
)

// --ring-bytes: the default is the record's size with --record and the
// plain one without; a size given wins; it makes the job run standalone;
// a bad size is refused before anything runs, saying what it wants.
func TestRunRingBytes(t *testing.T) {
	for _, c := range []struct {
		args []string
		want uint32
	}{
		{nil, loader.DefaultRingBytes},
		{[]string{"--record", "r.jsonl"}, loader.RecordRingBytes},
		{[]string{"--ring-bytes", "64K"}, 64 << 10},
		{[]string{"--ring-bytes", "2MiB", "--record", "r.jsonl"}, 2 << 20},
	} {
		var got *runOptions
		cmd := NewCmdRun(Streams{Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}, nil, func(o *runOptions) error { got = o; return nil })
		cmd.SetArgs(append(c.args, "--", "true"))
		if err := cmd.Execute(); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if j := got.standaloneJob(); j.RingBytes != c.want {
			t.Errorf("%v: ring %d, want %d", c.args, j.RingBytes, c.want)
		}
		if given := len(c.args) > 0 && c.args[0] == "--ring-bytes"; given && got.daemonWide != "--ring-bytes" {
			t.Errorf("%v: daemon-wide %q, want --ring-bytes", c.args, got.daemonWide)
		}
	}
	for _, bad := range []string{"3M", "1k", "lots", "0", "2G"} {
		ran := false
		var stderr bytes.Buffer
		cmd := NewCmdRun(Streams{Out: &bytes.Buffer{}, Err: &stderr}, nil, func(*runOptions) error { ran = true; return nil })
		cmd.SetArgs([]string{"--ring-bytes", bad, "--", "true"})
		cmd.SetErr(&stderr)
		err := cmd.Execute()
		if err == nil || ran || !errors.Is(err, lineage.ErrInvalid) || !strings.Contains(err.Error(), "ring buffer size") {
			t.Errorf("--ring-bytes %s: %v (ran %v), want a refusal", bad, err, ran)
		}
	}
}
