package bpf

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
)

// layoutFingerprints records, for each LayoutVersion, the fingerprint of
// what a pinned set shares between one binary and the next. A change to
// the maps or to the records in bpf/lineage.h changes the fingerprint: bump
// LayoutVersion, and record the new one here.
var layoutFingerprints = map[uint32]string{
	// Layout 1 never shipped before the kill-uid stat joined it: its
	// fingerprint includes STAT_UID_SPARED.
	1: "a01ec1e08a50febfb6e0a6f01bb79414919152035e9a5ba9975ba27341dfde25",
	// Layout 2: the arms map and arms_count (per-process arms), the
	// roots' cookie where layout 1 had padding, ROOT_F_ARMED and
	// EVENT_F_ARMED. A layout 1 set migrates: its roots and members have
	// the same sizes, and its roots' padding was zero.
	2: "1c814fe93b7b80618b42555abe296773479c68488beba870d7b37c174b5d3b04",
	// Layout 3: the keep_exes map and the kernel's own spare marks
	// (ROOT_F_KEPT, MEMBER_F_SPARED_EXE, MEMBER_F_CAUGHT, EVENT_F_SPARED,
	// EVENT_F_CAUGHT, the stats of the second fork hook and of the keeps).
	3: "e959214ce652c7feea8e505b89c4044ddfa5c9c231327b4bd00d1f288af316c7",
	// Layout 4 adds the reaper's lease (reap_lease_ns) to .bss: kill-at-
	// birth ends when the holder of the tracker dies. The roots and
	// members maps are layout 3's, so a layout 1, 2 or 3 set migrates.
	4: "d4587cd97cf5e4470fef00cc2f09d88d9b070eebf4e8074a852d07cf663610a9",
	// Layout 5: exec records sized to what they carry (struct event ends
	// at comm, filename_size where padding was; struct exec_event), and
	// the drops map (struct drop_log, struct lost). Its members and roots
	// are layout 3's: a set of layout 1 to 4 migrates, its ring's backlog
	// read in the fixed slots those wrote.
	5: "ca45354f61768e389e3433eda1c474c361e7e8a598e79b66d40b9e43e8763ce6",
}

func TestLayoutVersionNamesTheLayout(t *testing.T) {
	var b strings.Builder
	for _, load := range []func() (*ebpf.CollectionSpec, error){loadLineage, loadLineageCompat} {
		spec, err := load()
		if err != nil {
			t.Fatal(err)
		}
		describeLayout(t, &b, spec)
	}
	got := fmt.Sprintf("%x", sha256.Sum256([]byte(b.String())))
	if want := layoutFingerprints[LayoutVersion]; got != want {
		t.Errorf("layout %d has fingerprint %s, recorded %q: the pinned layout changed; bump LayoutVersion and record the new fingerprint\n%s",
			LayoutVersion, got, want, b.String())
	}
}

// describeLayout writes the shape of spec's pinned maps and shared records.
func describeLayout(t *testing.T, b *strings.Builder, spec *ebpf.CollectionSpec) {
	t.Helper()
	names := make([]string, 0, len(pinnedMaps))
	for name := range pinnedMaps {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		m := spec.Maps[name]
		fmt.Fprintf(b, "map %s %v key %d value %d flags %#x\n", name, m.Type, m.KeySize, m.ValueSize, m.Flags)
		if m.Value != nil {
			describeType(b, m.Value)
		}
	}
	for _, name := range []string{"event", "exec_event", "member", "root", "keep_exe", "drop_log", "lost"} {
		var s *btf.Struct
		if err := spec.Types.TypeByName(name, &s); err != nil {
			t.Fatalf("struct %s: %v", name, err)
		}
		describeType(b, s)
	}
	for _, name := range []string{"event_kind", "event_flag", "root_flag", "member_flag", "stat"} {
		var e *btf.Enum
		if err := spec.Types.TypeByName(name, &e); err != nil {
			t.Fatalf("enum %s: %v", name, err)
		}
		describeType(b, e)
	}
}

func describeType(b *strings.Builder, typ btf.Type) {
	switch v := typ.(type) {
	case *btf.Struct:
		fmt.Fprintf(b, "struct %s %d\n", v.Name, v.Size)
		for _, m := range v.Members {
			size, _ := btf.Sizeof(m.Type)
			fmt.Fprintf(b, "  %s @%d %d bits %d\n", m.Name, m.Offset, size, m.BitfieldSize)
		}
	case *btf.Datasec:
		fmt.Fprintf(b, "datasec %s %d\n", v.Name, v.Size)
		for _, vs := range v.Vars {
			fmt.Fprintf(b, "  %s @%d %d\n", vs.Type.TypeName(), vs.Offset, vs.Size)
		}
	case *btf.Enum:
		fmt.Fprintf(b, "enum %s\n", v.Name)
		for _, val := range v.Values {
			fmt.Fprintf(b, "  %s = %d\n", val.Name, val.Value)
		}
	default:
		size, _ := btf.Sizeof(typ)
		fmt.Fprintf(b, "%s %d\n", typ.TypeName(), size)
	}
}
