package job

import (
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/internal/loader"
)

func TestUntrackedWarning(t *testing.T) {
	for _, c := range []struct {
		st   loader.Stats
		want string
	}{
		{loader.Stats{MembersFull: 2, UntrackedKilled: 2}, "2 processes could not be tracked, the membership map being full, and were killed"},
		{loader.Stats{MembersFull: 2}, "2 processes were not tracked, the membership map being full, and escaped"},
		{loader.Stats{MembersFull: 3, UntrackedKilled: 1}, "3 processes could not be tracked, the membership map being full: 1 was killed, 2 escaped"},
		{loader.Stats{MembersFull: 1, UntrackedKilled: 1}, "1 process could not be tracked, the membership map being full, and was killed"},
		{loader.Stats{MembersFull: 1}, "1 process was not tracked, the membership map being full, and escaped"},
	} {
		if got := untrackedWarning(c.st); !strings.HasPrefix(got, c.want) {
			t.Errorf("%+v: %q, want %q...", c.st, got, c.want)
		}
	}
}
