package userfile

import (
	"os"
	"path/filepath"
	"testing"
)

func TestSame(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.WriteFile("rec.jsonl", []byte("record"), 0o600))
	must(os.WriteFile("other.jsonl", []byte("other"), 0o600))
	must(os.Symlink("rec.jsonl", "link.jsonl"))
	must(os.Link("rec.jsonl", "hard.jsonl"))
	must(os.Mkdir("sub", 0o755))
	must(os.Symlink("sub", "sublink"))
	for _, c := range []struct {
		a, b string
		same bool
	}{
		{"rec.jsonl", "rec.jsonl", true},
		{"rec.jsonl", "./rec.jsonl", true},
		{"rec.jsonl", filepath.Join(dir, "sub", "..", "rec.jsonl"), true},
		{"link.jsonl", "rec.jsonl", true},
		{"rec.jsonl", "hard.jsonl", true},
		{"new.json", "./sub/../new.json", true},
		// Not there yet, in one directory reached two ways.
		{"sub/new.json", "sublink/new.json", true},
		{"rec.jsonl", "other.jsonl", false},
		{"new.json", "new.jsonl", false},
		{"sub/new.json", "new.json", false},
	} {
		if got := Same(c.a, c.b); got != c.same {
			t.Errorf("Same(%q, %q) = %v, want %v", c.a, c.b, got, c.same)
		}
		if got := Same(c.b, c.a); got != c.same {
			t.Errorf("Same(%q, %q) = %v, want %v", c.b, c.a, got, c.same)
		}
	}
}
