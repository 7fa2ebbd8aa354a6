package loader

import (
	"errors"
	"os"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

func TestParseRingBytes(t *testing.T) {
	page := uint32(os.Getpagesize())
	for in, want := range map[string]uint32{
		"8M": 8 << 20, "8MiB": 8 << 20, "8 mib": 8 << 20, "16k": 16 << 10, "16KiB": 16 << 10,
		"1G": 1 << 30, "1048576": 1 << 20, " 4M ": 4 << 20,
	} {
		got, err := ParseRingBytes(in)
		if err != nil || got != want {
			t.Errorf("ParseRingBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "abc", "3M", "1k", "0", "-4M", "2G", "4M4", "4.5M", "99999999999999999999", "4T"} {
		if n, err := ParseRingBytes(in); !errors.Is(err, lineage.ErrInvalid) {
			t.Errorf("ParseRingBytes(%q) = %d, %v; want an invalid-option error", in, n, err)
		}
	}
	if err := ValidateRingBytes(page); err != nil {
		t.Errorf("a page: %v", err)
	}
	if err := ValidateRingBytes(page / 2); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("half a page: %v", err)
	}
}

func TestFormatBytes(t *testing.T) {
	for n, want := range map[uint64]string{1 << 20: "1MiB", 8 << 20: "8MiB", 4096: "4KiB", 1 << 30: "1GiB", 1536: "1536", 3 << 19: "1536KiB"} {
		if got := FormatBytes(n); got != want {
			t.Errorf("FormatBytes(%d) = %q, want %q", n, got, want)
		}
		if n&(n-1) == 0 && n >= 4096 {
			if back, err := ParseRingBytes(FormatBytes(n)); err != nil || uint64(back) != n {
				t.Errorf("ParseRingBytes(FormatBytes(%d)) = %d, %v", n, back, err)
			}
		}
	}
}
