package tracker

import "github.com/lineage-dev/lineage/lineage"

// rootsLister is a backend that lists many roots' members in one pass.
type rootsLister interface {
	MembersOfRoots(roots []lineage.Identity) (map[lineage.Identity][]lineage.Member, error)
}

// MembersOf returns the live members of each of roots, in one pass over
// the backend's membership where it can make one (bpf), else root by root.
// A root whose members can't be read is left out. It is a snapshot for
// saving state, not the listing a reap works from ([Job.Members]).
func (t *Tracker) MembersOf(roots []lineage.Identity) map[lineage.Identity][]lineage.Member {
	if l, ok := t.backend.(rootsLister); ok {
		if out, err := l.MembersOfRoots(roots); err == nil {
			return out
		}
	}
	out := make(map[lineage.Identity][]lineage.Member, len(roots))
	for _, r := range roots {
		if ms, err := t.backend.Members(r); err == nil {
			out[r] = ms
		}
	}
	return out
}
