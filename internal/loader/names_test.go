package loader

import (
	"errors"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

// TestOptionsRefuseBadInput checks that every option's parser reads what
// it documents and refuses the rest with lineage.ErrInvalid.
func TestOptionsRefuseBadInput(t *testing.T) {
	if got, err := ParseBackend(" BPF "); err != nil || got != BackendBPF {
		t.Errorf("ParseBackend(BPF) = %q, %v", got, err)
	}
	if got, err := ParseBackend(""); err != nil || got != BackendAuto {
		t.Errorf("ParseBackend(\"\") = %q, %v", got, err)
	}
	if got, err := ParseOnFull(""); err != nil || got != OnFullKill {
		t.Errorf("ParseOnFull(\"\") = %q, %v", got, err)
	}
	if got, err := ParseOnFull("escape"); err != nil || got != OnFullEscape {
		t.Errorf("ParseOnFull(escape) = %q, %v", got, err)
	}
	if err := ValidateMaxMembers(2); err != nil {
		t.Errorf("ValidateMaxMembers(2): %v", err)
	}
	for name, err := range map[string]error{
		"ParseBackend(lxc)":     second(ParseBackend("lxc")),
		"ParseOnFull(KILL)":     second(ParseOnFull("KILL")),
		"ParseInterval(-1s)":    second(ParseInterval("-1s")),
		"ParseInterval(soon)":   second(ParseInterval("soon")),
		"ValidateMaxMembers(1)": ValidateMaxMembers(1),
	} {
		if !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("%s: %v, want lineage.ErrInvalid", name, err)
		}
	}
}

func second[T any](_ T, err error) error { return err }
