package job

import (
	"os"
	"testing"
	"time"

	"github.com/lineage-dev/lineage/lineage"
)

// TestRootFill checks what the wait's end puts in the report.
func TestRootFill(t *testing.T) {
	for _, c := range []struct {
		name  string
		end   End
		check func(t *testing.T, r *Report)
	}{
		{name: "exit", end: End{Exited: true, Status: 3 << 8}, check: func(t *testing.T, r *Report) {
			if r.Exit == nil || r.Exit.Code == nil || *r.Exit.Code != 3 || r.Exit.Signal != "" || r.Deadline {
				t.Errorf("exit %+v, deadline %v", r.Exit, r.Deadline)
			}
		}},
		{name: "signal", end: End{Exited: true, Status: 9, Interrupted: os.Interrupt}, check: func(t *testing.T, r *Report) {
			if r.Exit == nil || r.Exit.Code != nil || r.Exit.Signal != "KILL" || r.Interrupted != "INT" {
				t.Errorf("exit %+v, interrupted %q", r.Exit, r.Interrupted)
			}
		}},
		{name: "deadline", end: End{Deadline: true}, check: func(t *testing.T, r *Report) {
			if r.Exit != nil || !r.Deadline {
				t.Errorf("exit %+v, deadline %v", r.Exit, r.Deadline)
			}
		}},
		{name: "fatal", end: End{Fatal: os.Kill}, check: func(t *testing.T, r *Report) {
			if r.Exit != nil || r.Fatal != "KILL" {
				t.Errorf("exit %+v, fatal %q", r.Exit, r.Fatal)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			id := lineage.Identity{PID: 100, StartTicks: 5}
			started := time.Unix(1000, 0)
			root := &Root{id: id, command: []string{"job"}, started: started, end: c.end, took: time.Second}
			var r Report
			root.Fill(&r)
			if r.JobTook != time.Second || r.Root != id || !r.Started.Equal(started) || len(r.Command) != 1 {
				t.Errorf("took %v, root %v, started %v, command %q", r.JobTook, r.Root, r.Started, r.Command)
			}
			c.check(t, &r)
		})
	}
}
