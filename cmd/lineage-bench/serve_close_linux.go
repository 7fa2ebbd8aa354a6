package main

import (
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/lineage-dev/lineage/api"
	"golang.org/x/sys/unix"
)

// measureClose times a session close of roots roots with each leftovers
// each (setsid sleepers that obey SIGTERM, started through `lineage
// exec`) on each of daemons, interleaved round by round with the pidfd
// floor for roots×each. The figures are keyed by the daemons' names, and
// "floor".
func measureClose(daemons map[string]*serveDaemon, rounds, roots, each int) (map[string][]float64, error) {
	if err := becomeSubreaper(); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(daemons))
	for name := range daemons {
		names = append(names, name)
	}
	slices.Sort(names)
	out := make(map[string][]float64)
	for r := 0; r < rounds; r++ {
		floor, _, err := pidfdKill(roots*each, unix.SIGKILL, fmt.Sprintf("%d%06d", r, os.Getpid()%1000000))
		if err != nil {
			return nil, fmt.Errorf("floor: %w", err)
		}
		out["floor"] = append(out["floor"], float64(floor))
		for _, name := range names {
			took, err := closeOnce(daemons[name], fmt.Sprintf("bench-close-%d", r), roots, each)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			out[name] = append(out[name], float64(took))
		}
	}
	return out, nil
}

// closeOnce starts roots roots with each leftovers each in session on d,
// and times the session's close.
func closeOnce(d *serveDaemon, session string, roots, each int) (time.Duration, error) {
	for i := 0; i < roots; i++ {
		if msg, err := d.lineageExec(session, "sh", "-c", leftovers(each)).CombinedOutput(); err != nil {
			return 0, fmt.Errorf("exec: %v: %s", err, msg)
		}
	}
	live, err := d.waitMembers(session, roots*each)
	if err != nil {
		return 0, err
	}
	var end api.Ended
	start := time.Now()
	err = d.do("POST", "/v1/sessions/"+session+"/close", nil, &end)
	took := time.Since(start)
	reapZombies(live)
	if err != nil {
		return 0, err
	}
	if ended := countEnded(end); ended < roots*each {
		return 0, fmt.Errorf("close ended %d of %d leftovers", ended, roots*each)
	}
	return took, nil
}

func countEnded(end api.Ended) int {
	n := 0
	for _, r := range end.Roots {
		for _, o := range r.Outcomes {
			if o.Result == "terminated" || o.Result == "killed" || o.Result == "exited" {
				n++
			}
		}
	}
	return n
}

// closeHeld starts the reap benchmark's job as the one root of session on
// d, lets it exit once its n sleepers all run sleep, and times the
// session's close.
func closeHeld(d *serveDaemon, session string, n int, tag string) (time.Duration, error) {
	cmd := d.lineageExec(session, "sh", "-c", reapJob(n, tag))
	j, err := hold(cmd)
	if err != nil {
		return 0, err
	}
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	if _, _, err := j.release(n, tag); err != nil {
		_ = cmd.Process.Kill() // our child, not yet waited for
		_ = cmd.Wait()
		return 0, err
	}
	_ = cmd.Wait()
	live, err := d.waitMembers(session, n)
	if err != nil {
		return 0, err
	}
	var end api.Ended
	start := time.Now()
	err = d.do("POST", "/v1/sessions/"+session+"/close", nil, &end)
	took := time.Since(start)
	reapZombies(live)
	if err != nil {
		return 0, err
	}
	if ended := countEnded(end); ended < n {
		return 0, fmt.Errorf("close ended %d of %d leftovers", ended, n)
	}
	return took, nil
}
