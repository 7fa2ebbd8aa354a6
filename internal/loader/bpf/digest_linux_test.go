package bpf

import (
	"testing"

	"github.com/lineage-dev/lineage/internal/buildinfo"
)

// The front prints the digest of the objects the tracker embeds: the
// constant it reads must be theirs. `make generate` rewrites it.
func TestCommittedBPFDigest(t *testing.T) {
	got := buildinfo.Digest(map[string][]byte{"lineage": _LineageBytes, "lineagecompat": _LineageCompatBytes, "inspect": _InspectBytes})
	if buildinfo.CommittedBPF != got {
		t.Fatalf("buildinfo.CommittedBPF = %q, the embedded objects' digest is %q: run make generate", buildinfo.CommittedBPF, got)
	}
	if b := buildinfo.Get().BPF; b != got {
		t.Fatalf("buildinfo.Get().BPF = %q, want %q", b, got)
	}
}
