package tracker

import (
	"fmt"
	"sync"

	"github.com/lineage-dev/lineage/internal/proc"
	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// keepTally is the reaper's Keep for a job's keep rules, remembering which
// rules spared something so that the report can name those that matched
// nothing.
type keepTally struct {
	rules policy.KeepRules
	tree  *lineage.Tree
	proc  proc.FS

	mu   sync.Mutex
	used map[int]bool
}

func newKeepTally(rules policy.KeepRules, tree *lineage.Tree, procFS proc.FS) *keepTally {
	return &keepTally{rules: rules, tree: tree, proc: procFS, used: make(map[int]bool)}
}

// keep is the reaper's Keep (see match).
func (k *keepTally) keep(m lineage.Member) (bool, string) {
	rule, ok := k.match(m)
	if !ok {
		return false, ""
	}
	return true, "kept by --keep " + rule.String()
}

// match returns the first rule that keeps m: an exe rule matches the file
// the member's last exec named (as the backend recorded it) or the
// executable the kernel shows for it now; the other rules match the
// member itself.
func (k *keepTally) match(m lineage.Member) (policy.Keep, bool) {
	if known, ok := k.tree.Get(m.Identity); ok && m.Filename == "" {
		m.Filename = known.Filename
	}
	exe, _ := k.proc.Exe(int(m.PID))
	for i, rule := range k.rules {
		if rule.Spares(m) || rule.SparesExe(exe) {
			k.mu.Lock()
			k.used[i] = true
			k.mu.Unlock()
			return rule, true
		}
	}
	return policy.Keep{}, false
}

// unused says which rules spared nothing.
func (k *keepTally) unused() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	var out []string
	for i, rule := range k.rules {
		if !k.used[i] {
			out = append(out, fmt.Sprintf("--keep %s matched no process", rule))
		}
	}
	return out
}
