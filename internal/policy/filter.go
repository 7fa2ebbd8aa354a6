package policy

import (
	"fmt"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// Verdict is one candidate and the reason it landed where it did.
type Verdict struct {
	Candidate
	Reason string
}

// Split is a candidate list after [Filter].
type Split struct {
	// Victims may be signalled (after the reaper's own identity check).
	Victims []Verdict
	// Kept are spared on purpose by a keep rule; the report lists them as kept.
	Kept []Verdict
	// Protected may never be signalled.
	Protected []Verdict
}

// Filter splits candidates for a reap of root's lineage into victims, kept
// and protected. Every candidate lands in exactly one list, unchanged and in
// input order, so the three lists together are exactly the candidates. A
// candidate is protected when [Protect] says so, else kept when a rule of
// keep spares it, else a victim: victims are only ever taken from
// candidates, and adding keep rules can only move a victim to kept.
//
// Filter fails, wrapping [lineage.ErrInvalid] and sorting nothing, when caller or
// root is incomplete: then nothing may be signalled.
func Filter(caller Caller, root lineage.Identity, keep KeepRules, candidates []Candidate) (Split, error) {
	if err := caller.Validate(); err != nil {
		return Split{}, fmt.Errorf("filter candidates: %w", err)
	}
	if err := root.Validate(); err != nil {
		return Split{}, fmt.Errorf("filter candidates: %w root: %w", lineage.ErrInvalid, err)
	}
	var s Split
	for _, c := range candidates {
		if why, ok := Protect(caller, root, c); ok {
			s.Protected = append(s.Protected, Verdict{c, why})
			continue
		}
		if k, ok := keep.Spares(c.Member); ok {
			s.Kept = append(s.Kept, Verdict{c, "kept on purpose (" + k.String() + ")"})
			continue
		}
		s.Victims = append(s.Victims, Verdict{c, "member of root " + root.String()})
	}
	return s, nil
}
