package tracker

import (
	"errors"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/loader/bpf"
	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
)

func TestOpenProcWhenAsked(t *testing.T) {
	b, choice, err := openBackend("proc", backendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if b.Name() != "proc" || choice != (loader.Choice{Backend: "proc", Asked: "proc", Reason: "asked for proc"}) {
		t.Errorf("got %s, %+v", b.Name(), choice)
	}
}

// Where BPF loads (as root here), bpf and auto both give BPF; where it
// can't, bpf fails with the reason and auto falls back and says why. The
// unprivileged case runs in a helper (TestProcCatchesEscapesUnprivileged).
func TestOpenBPFOrAuto(t *testing.T) {
	b, choice, err := openBackend("bpf", backendOptions{})
	if err != nil {
		if !errors.Is(err, loader.ErrUnavailable) {
			t.Fatalf("open bpf: %v", err)
		}
		a, achoice, aerr := openBackend("auto", backendOptions{})
		if aerr != nil {
			t.Fatalf("auto where bpf can't load: %v", aerr)
		}
		a.Close()
		if achoice.Backend != "proc" || !strings.HasPrefix(achoice.Reason, "bpf: ") || !strings.HasSuffix(achoice.Reason, "; using proc") {
			t.Errorf("auto: %+v", achoice)
		}
		testutil.SkipWithoutBPF(t, err)
		return
	}
	b.Close()
	if choice != (loader.Choice{Backend: "bpf", Asked: "bpf", Reason: "asked for bpf"}) {
		t.Errorf("bpf: %+v", choice)
	}
	a, achoice, err := openBackend("auto", backendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.Name() != "bpf" || achoice != (loader.Choice{Backend: "bpf", Asked: "auto", Reason: "bpf loaded"}) {
		t.Errorf("auto: %s, %+v", a.Name(), achoice)
	}
	// A bad BPF option is the BPF backend's error, whatever the choice:
	// auto does not fall back to proc for it.
	for _, choice := range []string{"bpf", "auto"} {
		if b, _, err := openBackend(choice, backendOptions{BPF: &bpf.Options{RingBytes: 3}}); !errors.Is(err, lineage.ErrInvalid) {
			if err == nil {
				b.Close()
			}
			t.Errorf("%s with a bad ring size: %v, want an invalid-option error", choice, err)
		}
	}
}
