package tracker

import (
	"errors"
	"slices"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// TestExeKeepsLearnAReplacedFileOnce: a rule's path resolved again names a
// new file once (an upgrade), the same file again never, and nothing for a
// path that is no rule's or that names no file now.
func TestExeKeepsLearnAReplacedFileOnce(t *testing.T) {
	old := lineage.FileID{Dev: lineage.KernelDev(8, 1), Ino: 100}
	now := old
	files := map[string]*lineage.FileID{"/opt/tool": &now}
	resolve := func(p string) (string, lineage.FileID, error) {
		if f, ok := files[p]; ok && !f.IsZero() {
			return p, *f, nil
		}
		return "", lineage.FileID{}, errors.New(p + ": no such file")
	}
	rules, err := policy.ParseKeeps([]string{"exe:/opt/tool", "exe:/opt/later", "5@5"})
	if err != nil {
		t.Fatal(err)
	}
	rules, _ = rules.ResolveExe(resolve) // /opt/later is not there yet
	e := newExeKeeps(rules, resolve)
	if got := e.files(); !slices.Equal(got, []lineage.FileID{old}) {
		t.Fatalf("files %v, want the one resolved file", got)
	}
	if _, _, changed := e.recheck("/opt/tool"); changed {
		t.Error("the same file counts as a change")
	}
	now = lineage.FileID{Dev: old.Dev, Ino: 200}
	f, before, changed := e.recheck("/opt/tool")
	if !changed || f != now || !slices.Equal(before, []lineage.FileID{old}) {
		t.Errorf("recheck after the upgrade = %v, %v, %v; want the new file, the old one before", f, before, changed)
	}
	if _, _, changed := e.recheck("/opt/tool"); changed {
		t.Error("the new file counts as a change twice")
	}
	if got := e.files(); len(got) != 2 {
		t.Errorf("files %v, want the old and the new", got)
	}
	if _, _, changed := e.recheck("/opt/other"); changed {
		t.Error("a path of no rule counts as a change")
	}
	now = lineage.FileID{}
	if _, _, changed := e.recheck("/opt/tool"); changed {
		t.Error("a path that names nothing now counts as a change")
	}
	// A rule that did not resolve when it was made learns its file when it
	// first names one: it had none before.
	later := lineage.FileID{Dev: old.Dev, Ino: 300}
	files["/opt/later"] = &later
	if f, before, changed := e.recheck("/opt/later"); !changed || f != later || len(before) != 0 {
		t.Errorf("recheck of a rule that resolves late = %v, %v, %v", f, before, changed)
	}
	var none *exeKeeps
	if none.files() != nil || none.changes() != nil {
		t.Error("a job without exe rules has files or changes")
	}
}
