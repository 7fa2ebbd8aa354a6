package bpf

import (
	"errors"
	"os"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/testutil"
)

// TestLoadEveryVariant loads every variant the kernel's features allow, and
// the one auto picks. A refusal by the verifier fails with its whole log.
func TestLoadEveryVariant(t *testing.T) {
	if err := loader.ProbeHost().Check(); err != nil {
		testutil.SkipWithoutBPF(t, err)
	}
	f, err := ProbeFeatures()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kernel %s: features %+v", loader.ProbeHost().Release, f)
	for _, v := range []loader.Variant{loader.VariantAuto, loader.VariantFull, loader.VariantCompat} {
		want, werr := f.Resolve(v)
		b, err := Open(&Options{Variant: v})
		var verr *ebpf.VerifierError
		switch {
		case errors.As(err, &verr):
			t.Errorf("variant %q: %v\n%+v", v, err, verr)
		case werr != nil:
			if !errors.Is(err, loader.ErrVariantUnsupported) {
				t.Errorf("variant %q: the features say %v; open says %v", v, werr, err)
			}
			t.Logf("variant %q: %v", v, err)
		case err != nil:
			t.Errorf("variant %q: %v", v, err)
		default:
			got := b.Loaded()
			got.Batch = loader.Batch{} // the batch programs' own tests look at them
			if got != want {
				t.Errorf("variant %q: loaded %+v, want %+v", v, got, want)
			}
			catches, off := b.ForkCatcher()
			t.Logf("variant %q: %+v; second fork hook %v %s", v, b.Loaded(), catches, off)
			if b.Loaded().Variant == loader.VariantFull && !catches && hasTracefs() {
				t.Errorf("variant %q: no second fork hook, though tracefs is mounted: %s", v, off)
			}
			b.Close()
		}
	}
}

// hasTracefs reports whether tracefs is mounted where classic tracepoints
// attach through it.
func hasTracefs() bool {
	for _, dir := range []string{"/sys/kernel/tracing", "/sys/kernel/debug/tracing"} {
		if _, err := os.Stat(dir + "/events/sched/sched_process_fork/id"); err == nil {
			return true
		}
	}
	return false
}
