package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/api"
)

func TestEarlierBoot(t *testing.T) {
	booted := time.Now().Add(-time.Hour)
	before, after := booted.Add(-time.Minute), booted.Add(time.Minute)
	for _, c := range []struct {
		name    string
		boot    string // this boot's id
		st      snapshot[api.Session]
		parsed  bool
		written time.Time
		want    bool
	}{
		{"same boot", "b1", snapshot[api.Session]{Boot: "b1"}, true, after, false},
		{"another boot", "b1", snapshot[api.Session]{Boot: "b0"}, true, after, true},
		{"same boot id wins over an odd clock", "b1", snapshot[api.Session]{Boot: "b1"}, true, before, false},
		{"no boot id, written since boot", "b1", snapshot[api.Session]{}, true, after, false},
		{"no boot id, written before boot", "b1", snapshot[api.Session]{}, true, before, true},
		{"this boot unknown", "", snapshot[api.Session]{Boot: "b0"}, true, before, true},
		{"torn, written before boot", "b1", snapshot[api.Session]{}, false, before, true},
		{"torn, written since boot", "b1", snapshot[api.Session]{}, false, after, false},
	} {
		f := &Store{boot: c.boot}
		if got := f.earlierBoot(c.st, c.parsed, c.written, booted); got != c.want {
			t.Errorf("%s: earlierBoot = %v, want %v", c.name, got, c.want)
		}
	}
}

// A state written in another boot names processes and pins that died with
// it: it reads back as no state, and the snapshot and the journal are set
// aside.
func TestLoadSetsAsideAnEarlierBoot(t *testing.T) {
	dir := t.TempDir()
	f, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if f.boot == "" {
		t.Fatalf("no boot id from %s", bootIDFile)
	}
	old := snapshot[api.Session]{Version: stateVersion, Boot: "not-" + f.boot, NextID: 7, Sessions: []api.Session{{ID: "s1", Kind: "autonomous"}}}
	data, _ := json.Marshal(old)
	path := filepath.Join(dir, SnapshotName)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	journal := filepath.Join(dir, JournalName)
	if err := os.WriteFile(journal, []byte(`{"seq":1,"next_id":8}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	st, ok, err := f.Load(func(format string, args ...any) { fmt.Fprintf(&log, format, args...) })
	if err != nil {
		t.Fatal(err)
	}
	if ok || len(st.Sessions) != 0 || st.NextID != 0 {
		t.Errorf("read back %d sessions (next id %d, ok %v) from an earlier boot", len(st.Sessions), st.NextID, ok)
	}
	if _, err := os.Stat(path + ".earlier-boot"); err != nil {
		t.Errorf("the earlier boot's state was not set aside: %v", err)
	}
	if _, err := os.Stat(journal + ".earlier-boot"); err != nil {
		t.Errorf("the earlier boot's journal was not set aside: %v", err)
	}
	for _, p := range []string{path, journal} {
		if _, err := os.Stat(p); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", p, err)
		}
	}
	if !strings.Contains(log.String(), "earlier boot") {
		t.Errorf("nothing said: %q", log.String())
	}
}

// The state names this boot, is written without a temporary file left
// behind (a snapshot, and an empty journal beside it), and reads back as
// written.
func TestStateWriteNamesTheBoot(t *testing.T) {
	dir := t.TempDir()
	f, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := saveAll(f, snapshot[api.Session]{Version: stateVersion, Boot: f.boot, NextID: 3, Sessions: []api.Session{}}); err != nil {
		t.Fatal(err)
	}
	var names []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if !slices.Equal(names, []string{JournalName, SnapshotName}) {
		t.Fatalf("state dir holds %v, want %s and %s", names, SnapshotName, JournalName)
	}
	data, err := os.ReadFile(filepath.Join(dir, SnapshotName))
	if err != nil {
		t.Fatal(err)
	}
	var back snapshot[api.Session]
	if err := json.Unmarshal(data, &back); err != nil || back.Boot != f.boot || back.NextID != 3 {
		t.Fatalf("read back %+v (%v), want boot %q next id 3", back, err, f.boot)
	}
}
