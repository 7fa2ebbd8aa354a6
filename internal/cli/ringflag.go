package cli

import (
	"github.com/spf13/pflag"

	"github.com/lineage-dev/lineage/internal/loader"
)

// RingBytes is a --ring-bytes flag: the bpf backend's event ring buffer
// size, read by loader.ParseRingBytes ("8M", "16MiB", "4194304") and
// checked as it is set, so that a bad size is refused before anything runs.
// Unset, its size is the default for the command (Or).
type RingBytes struct {
	n uint32
}

// AddRingBytes adds --ring-bytes to f; what is the flag's help after the
// size rules.
func AddRingBytes(f *pflag.FlagSet, r *RingBytes, what string) {
	f.Var(r, "ring-bytes", "bpf backend: size of the event ring buffer (`SIZE`: bytes, or K, M, G for KiB, MiB, GiB), a power of two from a page to "+
		loader.FormatBytes(loader.MaxRingBytes)+"; events that don't fit are counted as lost, and placed in the record; "+what)
}

// Or is the size given, or def when none was.
func (r *RingBytes) Or(def uint32) uint32 {
	if r.n == 0 {
		return def
	}
	return r.n
}

// Set implements pflag.Value.
func (r *RingBytes) Set(s string) error {
	n, err := loader.ParseRingBytes(s)
	if err != nil {
		return err
	}
	r.n = n
	return nil
}

// String implements pflag.Value: the size given, or "" (the default).
func (r *RingBytes) String() string {
	if r.n == 0 {
		return ""
	}
	return loader.FormatBytes(uint64(r.n))
}

// Type implements pflag.Value.
func (r *RingBytes) Type() string { return "SIZE" }
