package job

import (
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/api"
	"github.com/lineage-dev/lineage/lineage"
)

// A run's session id names the calling process and can't be guessed from
// it (its pid and start time are anyone's to read in /proc): two runs by
// the same process get two ids, each a valid session id.
func TestRunSessionIDIsNotToBeGuessed(t *testing.T) {
	self := lineage.Identity{PID: 4194304, StartTicks: 1 << 40}
	a, b := runSessionID(self), runSessionID(self)
	for _, id := range []string{a, b} {
		if !strings.HasPrefix(id, "run-4194304-1099511627776-") || len(id) != len("run-4194304-1099511627776-")+10 {
			t.Errorf("session id %q, want run-PID-START- and 10 random characters", id)
		}
		if err := api.CheckSessionID(id); err != nil {
			t.Error(err)
		}
	}
	if a == b {
		t.Errorf("two runs got the same session id %q", a)
	}
}
