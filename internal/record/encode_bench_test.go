package record

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

var benchEvent = func() Event {
	id := lineage.Identity{PID: 12345, StartTicks: 678901}
	return Event{Kind: KindExec, Boot: time.Hour, Wall: time.Unix(1_770_000_000, 5).UTC(), Process: id, Parent: id, Root: id,
		Comm: "cc", Exe: "/usr/bin/cc", Argv: []string{"cc", "-O2", "-c", "src/file.c", "-o", "obj/file.o"}}
}()

// BenchmarkEncodeEvent compares the Writer's hand encoder with
// encoding/json on an exec event.
func BenchmarkEncodeEvent(b *testing.B) {
	b.Run("hand", func(b *testing.B) {
		buf := make([]byte, 0, 512)
		for range b.N {
			buf, _ = appendEvent(buf[:0], &benchEvent)
		}
	})
	b.Run("encoding-json", func(b *testing.B) {
		for range b.N {
			_, _ = json.Marshal(benchEvent)
		}
	})
}
