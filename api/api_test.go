package api

import (
	"errors"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

func TestCheckSessionID(t *testing.T) {
	for _, id := range []string{"s1", "turn-7", "recovered-2", "A.b_c-d", strings.Repeat("x", 64)} {
		if err := CheckSessionID(id); err != nil {
			t.Errorf("CheckSessionID(%q): %v", id, err)
		}
	}
	for _, id := range []string{"", "-x", ".x", "a b", "a/b", "é", strings.Repeat("x", 65)} {
		if err := CheckSessionID(id); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("CheckSessionID(%q): %v, want ErrInvalid", id, err)
		}
	}
}
