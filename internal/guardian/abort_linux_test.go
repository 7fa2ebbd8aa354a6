package guardian

import (
	"io"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/internal/testutil"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// orderSource is a bpf-like source that records what abort asks of it.
type orderSource struct {
	members []lineage.Member
	calls   []string
	spared  []lineage.Identity
}

func (s *orderSource) Members() ([]lineage.Member, error) { return s.members, nil }
func (s *orderSource) setRoot(lineage.Identity)           {}
func (s *orderSource) add(lineage.Identity) error         { return nil }
func (s *orderSource) close()                             {}

func (s *orderSource) contain() (lineage.Containment, error) {
	s.calls = append(s.calls, "contain")
	return lineage.ContainKernel, nil
}

func (s *orderSource) spare(id lineage.Identity) error {
	s.calls = append(s.calls, "spare")
	s.spared = append(s.spared, id)
	return nil
}

// TestAbortSparesInTheKernelBeforeContaining: what the keep rules keep is
// marked in the kernel before the lineage is contained, and not signalled.
func TestAbortSparesInTheKernelBeforeContaining(t *testing.T) {
	mark := testutil.Marker(t)
	testutil.CheckNoLeaks(t, mark)
	kept := sleeper(t, mark)
	t.Cleanup(func() { testutil.KillIdentity(int(kept.PID), kept.StartTicks) })
	rules, err := policy.ParseKeeps([]string{kept.String()})
	if err != nil {
		t.Fatal(err)
	}
	root := lineage.Identity{PID: 99999998, StartTicks: 1}
	src := &orderSource{members: []lineage.Member{{Identity: kept, Root: root}}}
	h := &hello{Version: version, Backend: backendBPF, Grace: time.Second, Keep: rules,
		Caller: policy.Caller{PID: 99999999}}
	if err := abort(h, root, src, io.Discard); err != nil {
		t.Fatal(err)
	}
	if len(src.spared) != 1 || src.spared[0] != kept {
		t.Errorf("spared %v, want %v", src.spared, kept)
	}
	if len(src.calls) < 2 || src.calls[0] != "spare" || src.calls[1] != "contain" {
		t.Errorf("calls %v, want spare before contain", src.calls)
	}
	if !testutil.Alive(int(kept.PID), kept.StartTicks) {
		t.Error("the kept member was killed")
	}
}
