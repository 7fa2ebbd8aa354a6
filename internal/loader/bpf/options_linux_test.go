package bpf

import (
	"errors"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

// TestBPFOptionsAreCheckedFirst: every bad option is refused with
// lineage.ErrInvalid before anything is loaded, privileged or not.
func TestBPFOptionsAreCheckedFirst(t *testing.T) {
	for name, o := range map[string]Options{
		"ring not a power of two": {RingBytes: 3 << 12},
		"ring under a page":       {RingBytes: 1024},
		"one member":              {MaxMembers: 1},
		"unknown variant":         {Variant: "legacy"},
	} {
		if _, err := Open(&o); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("%s: %v, want lineage.ErrInvalid", name, err)
		}
	}
}
