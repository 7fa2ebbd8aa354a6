package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/cli"
)

// A --record that can't be created says so, naming the flag.
func TestOpenRecordNamesTheFlag(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing", "trace.jsonl")
	if _, err := openRecord(cli.StandaloneJob{RecordFile: missing}); err == nil || !strings.HasPrefix(err.Error(), "--record: ") {
		t.Errorf("got %v, want an error naming --record", err)
	}
}
