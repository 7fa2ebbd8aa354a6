package main

import (
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/cli"
	"github.com/lineage-dev/lineage/lineage"
)

// A command lineage exec can't find is said once, with one context, and
// nothing is sent: no daemon is asked.
func TestExecNotFoundSaysOneContext(t *testing.T) {
	var stderr strings.Builder
	s := cli.Streams{In: strings.NewReader(""), Out: &strings.Builder{}, Err: &stderr}
	code := cli.Execute(newRootCmd(s), s, []string{"exec", "--socket", "/nonexistent/lineage.sock", "--session", "s1", "--", "no-such-cmd-xyz"})
	if want := "lineage: exec: \"no-such-cmd-xyz\": executable file not found in $PATH\n"; code != lineage.ExitNotFound || stderr.String() != want {
		t.Errorf("exit %d, stderr %q; want %d, %q", code, stderr.String(), lineage.ExitNotFound, want)
	}
}
