package loader

import (
	"errors"
	"fmt"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

// Bad options of a backend the choice may open fail Open before anything
// opens, auto included; a backend the choice can't open has its options
// left unchecked.
func TestOpenChecksOptionsFirst(t *testing.T) {
	badBPF := fmt.Errorf("%w option: bpf", lineage.ErrInvalid)
	badProc := fmt.Errorf("%w option: proc", lineage.ErrInvalid)
	for _, c := range []struct {
		choice         string
		checkBPF, proc error
		want           error
	}{
		{"auto", badBPF, nil, badBPF},
		{"bpf", badBPF, nil, badBPF},
		{"proc", badBPF, nil, nil},
		{"auto", nil, badProc, badProc},
		{"proc", nil, badProc, badProc},
		{"bpf", nil, badProc, nil},
	} {
		var opened []string
		open := Openers{
			BPF:       func() (Backend, error) { opened = append(opened, "bpf"); return nil, ErrUnavailable },
			Proc:      func() (Backend, error) { opened = append(opened, "proc"); return nil, errors.New("no proc here") },
			CheckBPF:  func() error { return c.checkBPF },
			CheckProc: func() error { return c.proc },
		}
		_, _, err := Open(c.choice, open)
		switch {
		case c.want != nil && (!errors.Is(err, c.want) || len(opened) > 0):
			t.Errorf("%s with bpf %v, proc %v: %v after opening %v; want %v before opening anything", c.choice, c.checkBPF, c.proc, err, opened, c.want)
		case c.want == nil && len(opened) == 0:
			t.Errorf("%s with bpf %v, proc %v: %v, opened nothing; the other backend's options must not matter", c.choice, c.checkBPF, c.proc, err)
		}
	}
}
