package loader

import (
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/lineage-dev/lineage/lineage"
)

// DefaultRingBytes is the size of the bpf backend's event ring buffer
// unless told otherwise.
const DefaultRingBytes = 1 << 20

// RecordRingBytes is the size of the event ring buffer when a forensic
// record is written (`lineage run --record`, `lineage serve --record-dir`)
// unless told otherwise. Issue 23's fork storm (1,555 processes, about
// 1.2 MB of records) lost events beside a CPU hog on a two-CPU machine
// with 256 KiB in half the runs, and none in ten with 512 KiB or more
// (docs/benchmarks.md, "The ring buffer's size"): 8 MiB is sixteen times
// that, and holds the whole storm seven times over even with no reader.
const RecordRingBytes = 8 << 20

// MaxRingBytes bounds the event ring buffer: its memory is the kernel's,
// locked, mapped into the reader twice.
const MaxRingBytes = 1 << 30

// ValidateRingBytes checks a size for the bpf backend's event ring buffer:
// a power of two, at least a page and at most MaxRingBytes. Errors wrap
// lineage.ErrInvalid.
func ValidateRingBytes(n uint32) error {
	page := uint32(os.Getpagesize())
	if n < page || n&(n-1) != 0 || n > MaxRingBytes {
		return fmt.Errorf("%w option: ring buffer size %s: must be a power of two from %s to %s",
			lineage.ErrInvalid, FormatBytes(uint64(n)), FormatBytes(uint64(page)), FormatBytes(MaxRingBytes))
	}
	return nil
}

// ParseRingBytes reads a ring buffer size as [ParseBytes] does, and checks
// it as ValidateRingBytes does.
func ParseRingBytes(s string) (uint32, error) {
	n, err := ParseBytes(s)
	if err != nil {
		return 0, fmt.Errorf("%w option: ring buffer size %q: want a number of bytes, or of KiB, MiB or GiB (4M, 16MiB)", lineage.ErrInvalid, s)
	}
	if n > MaxRingBytes {
		return 0, fmt.Errorf("%w option: ring buffer size %q: more than %s", lineage.ErrInvalid, s, FormatBytes(MaxRingBytes))
	}
	if err := ValidateRingBytes(uint32(n)); err != nil {
		return 0, err
	}
	return uint32(n), nil
}

// ParseBytes reads a size of at least one byte: a number of bytes, or of
// KiB, MiB or GiB with a suffix K, M or G (KiB, MiB, GiB and any case too:
// "8M", "8MiB", "8388608"). Errors wrap lineage.ErrInvalid.
func ParseBytes(s string) (uint64, error) {
	text := strings.TrimSpace(s)
	num, unit := text, uint64(1)
	upper := strings.ToUpper(text)
	for _, u := range []struct {
		suffix string
		size   uint64
	}{{"KIB", 1 << 10}, {"MIB", 1 << 20}, {"GIB", 1 << 30}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}} {
		if strings.HasSuffix(upper, u.suffix) {
			num, unit = strings.TrimSpace(text[:len(text)-len(u.suffix)]), u.size
			break
		}
	}
	n, err := strconv.ParseUint(num, 10, 64)
	if err != nil || n == 0 {
		return 0, fmt.Errorf("%w size %q: want a number of bytes, or of KiB, MiB or GiB (4M, 16MiB)", lineage.ErrInvalid, s)
	}
	if n > math.MaxUint64/unit {
		return 0, fmt.Errorf("%w size %q: too large", lineage.ErrInvalid, s)
	}
	return n * unit, nil
}

// FormatBytes writes a size as ParseRingBytes reads it: in the largest of
// GiB, MiB and KiB that divides it, else in bytes ("8MiB", "4096").
func FormatBytes(n uint64) string {
	for _, u := range []struct {
		suffix string
		size   uint64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatUint(n/u.size, 10) + u.suffix
		}
	}
	return strconv.FormatUint(n, 10)
}
