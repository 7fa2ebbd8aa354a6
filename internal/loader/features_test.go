package loader

import (
	"errors"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

// TestResolveVariant decides, for kernels described by their features, which
// variant loads and what it does; kernel names are for the reader only.
func TestResolveVariant(t *testing.T) {
	all := Features{Kfuncs: true, Loop: true, ForEach: true, GroupDead: true}
	for _, c := range []struct {
		name   string
		f      Features
		forced Variant
		want   Loaded
		err    string
	}{
		{"6.16+", all, VariantAuto, Loaded{VariantFull, lineage.ContainKernel, HardCancelKernel, true, Batch{}}, ""},
		{"6.13-6.15: kfuncs, no group_dead", Features{Kfuncs: true, Loop: true, ForEach: true}, VariantAuto,
			Loaded{VariantFull, lineage.ContainKernel, HardCancelNone, false, Batch{}}, ""},
		{"6.1-6.12: callbacks, no kfuncs", Features{Loop: true, ForEach: true}, VariantAuto,
			Loaded{VariantCompat, lineage.ContainKernelForker, HardCancelNone, false, Batch{}}, ""},
		{"5.10: nothing but the baseline", Features{}, VariantAuto, Loaded{VariantCompat, lineage.ContainKernelForker, HardCancelNone, false, Batch{}}, ""},
		{"compat forced on 6.16+", all, VariantCompat, Loaded{VariantCompat, lineage.ContainKernelForker, HardCancelNone, false, Batch{}}, ""},
		{"full forced on 5.10", Features{}, VariantFull, Loaded{}, "needs the kfuncs bpf_task_from_pid and bpf_send_signal_task, bpf_loop, bpf_for_each_map_elem"},
		{"no ring buffer", Features{RingBuf: errors.New("ENOTSUPP")}, VariantAuto, Loaded{}, "no BPF ring buffer"},
		{"no tp_btf", Features{Tracing: errors.New("ENOTSUPP")}, VariantCompat, Loaded{}, "tp_btf"},
	} {
		got, err := c.f.Resolve(c.forced)
		if c.err != "" {
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%s: %v, want ErrUnavailable saying %q", c.name, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

func TestParseVariant(t *testing.T) {
	for in, want := range map[string]Variant{"": VariantAuto, "auto": VariantAuto, " Full ": VariantFull, "compat": VariantCompat} {
		if got, err := ParseVariant(in); err != nil || got != want {
			t.Errorf("ParseVariant(%q) = %q, %v", in, got, err)
		}
	}
	if _, err := ParseVariant("legacy"); !errors.Is(err, lineage.ErrInvalid) {
		t.Errorf("an unknown variant: %v", err)
	}
}
