package bpf

import (
	"errors"
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
			if got := b.Loaded(); got != want {
				t.Errorf("variant %q: loaded %+v, want %+v", v, got, want)
			}
			t.Logf("variant %q: %+v", v, b.Loaded())
			b.Close()
		}
	}
}
