package bpf

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

func TestUnkeepEndsTheKernelsRules(t *testing.T) { eachVariant(t, testUnkeepEndsTheKernelsRules) }

// testUnkeepEndsTheKernelsRules keeps a lineage whole and a program, takes
// both rules back, and only then lets the root fork a child that execs the
// program: neither the fork nor the exec marks it. The root's own mark, given
// with the rule, stays. Unkeeping for no root is refused.
func testUnkeepEndsTheKernelsRules(t *testing.T, v loader.Variant) {
	b := openBPF(t, &Options{Variant: v})
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	kept, file := keptCopy(t, "sleep")
	goFile := filepath.Join(t.TempDir(), "go")
	script := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.02; done; %s %s & wait", goFile, kept, testutil.Sleep(mark))
	id, _ := spawn(t, b, script, loader.RootOptions{})
	t.Cleanup(func() { killMembers(t, b, id) })
	if err := b.KeepLineage(id); err != nil {
		t.Fatal(err)
	}
	if err := b.KeepExe(id, file); err != nil {
		t.Fatal(err)
	}
	if !spared(t, b, id) {
		t.Fatal("the root of a kept lineage is not spared")
	}
	if err := b.UnkeepLineage(id); err != nil {
		t.Fatal(err)
	}
	if err := b.UnkeepExe(id, file); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(goFile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var child lineage.Identity
	waitFor(t, "the root's child running the program", 10*time.Second, func() bool {
		for _, p := range testutil.Find(mark) {
			if p.Argv[0] == kept {
				child = procID(p)
				return true
			}
		}
		return false
	})
	if spared(t, b, child) {
		t.Error("the child forked and exec'd after both rules were taken back is spared")
	}
	if !spared(t, b, id) {
		t.Error("the root's mark, given with the rule, did not stay")
	}
	none := lineage.Identity{PID: 2, StartTicks: 1}
	if err := b.UnkeepLineage(none); err == nil {
		t.Error("UnkeepLineage of no root succeeded")
	}
	if err := b.UnkeepExe(none, file); err == nil {
		t.Error("UnkeepExe of no root succeeded")
	}
}
