package policy

import (
	"errors"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/lineage-dev/lineage/internal/lineage"
)

func TestFilter(t *testing.T) {
	redis := cand(2002, 160)
	redis.Member.Filename = "/usr/bin/redis-server"
	reused := cand(2003, 170)
	reused.Stat.StartTicks = 999
	candidates := []Candidate{
		cand(testRoot.PID, testRoot.StartTicks),
		cand(2001, 150),
		redis,
		reused,
		cand(2004, 180),
		cand(999, 190), // lineage's parent, somehow recorded as a member
	}
	keep := KeepRules{mustKeep(t, "exe:/usr/bin/redis-server"), mustKeep(t, "2004@180")}

	s, err := Filter(testCaller, testRoot, keep, candidates)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	for name, list := range map[string][]Verdict{"victims": s.Victims, "kept": s.Kept, "protected": s.Protected} {
		for _, v := range list {
			got[name] = append(got[name], v.Member.Identity.String()+": "+v.Reason)
		}
	}
	want := map[string][]string{
		"victims": {
			"2000@100: member of root 2000@100",
			"2001@150: member of root 2000@100",
		},
		"kept": {
			"2002@160: kept on purpose (exe:/usr/bin/redis-server)",
			"2004@180: kept on purpose (2004@180)",
		},
		"protected": {
			"2003@170: identity mismatch: pid 2003 started at 999, the member at 170 (pid reused)",
			"999@190: pid 999 is an ancestor of lineage",
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Filter:\n got %q\nwant %q", got, want)
	}
}

func TestFilterInvalid(t *testing.T) {
	tests := []struct {
		name   string
		caller Caller
		root   lineage.Identity
	}{
		{"no caller", Caller{}, testRoot},
		{"no process group", Caller{PID: 1000}, testRoot},
		{"no root", testCaller, lineage.Identity{}},
		{"root pid 1", testCaller, lineage.Identity{PID: 1, StartTicks: 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Filter(tt.caller, tt.root, nil, []Candidate{cand(2001, 150)})
			if !errors.Is(err, lineage.ErrInvalid) {
				t.Errorf("Filter error = %v, want lineage.ErrInvalid", err)
			}
			if len(s.Victims)+len(s.Kept)+len(s.Protected) != 0 {
				t.Errorf("Filter sorted candidates despite the error: %+v", s)
			}
		})
	}
}

// TestFilterOnlySpares checks, for random callers, rule sets and candidate
// sets, that Filter partitions the candidates: victims ⊆ candidates, and
// victims, kept and protected are disjoint and together exactly the
// candidates, unchanged. It also checks that keep rules can only spare:
// adding rules never adds a victim, no victim is spared by a rule or
// protected, and everything kept is spared by a rule.
func TestFilterOnlySpares(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 2))
	roots := []lineage.Identity{{PID: 10, StartTicks: 100}, {PID: 11, StartTicks: 100}, {PID: 10, StartTicks: 101}}
	exes := []string{"", "/usr/bin/redis-server", "/usr/bin//redis-server", "redis-server", "/bin/sh", "/bin/sleep"}
	randID := func() lineage.Identity {
		return lineage.Identity{PID: uint32(rng.IntN(16)), StartTicks: uint64(rng.IntN(3)) * 100}
	}
	randRules := func() KeepRules {
		var rules KeepRules
		for range rng.IntN(4) {
			var k Keep
			var err error
			switch rng.IntN(3) {
			case 0:
				k, err = KeepIdentity(lineage.Identity{PID: 2 + uint32(rng.IntN(14)), StartTicks: 100 + uint64(rng.IntN(2))*100})
			case 1:
				k, err = KeepRoot(roots[rng.IntN(len(roots))])
			case 2:
				k, err = KeepExe([]string{"/usr/bin/redis-server", "/bin/sh", "/opt/none"}[rng.IntN(3)])
			}
			if err != nil {
				t.Fatal(err)
			}
			rules = append(rules, k)
		}
		return rules
	}

	for iter := range 5000 {
		caller := Caller{PID: 1 + rng.IntN(15), PGID: 5 + rng.IntN(3)}
		for pid := range 16 {
			if rng.IntN(8) == 0 {
				caller.Ancestors = append(caller.Ancestors, pid)
			}
		}
		root := roots[rng.IntN(len(roots))]

		candidates := make([]Candidate, rng.IntN(12))
		for i := range candidates {
			m := lineage.Member{
				Identity: randID(),
				Root:     []lineage.Identity{{}, roots[0], roots[1], roots[2]}[rng.IntN(4)],
				Comm:     strconv.Itoa(i), // a tag, to match outputs to inputs
				Filename: exes[rng.IntN(len(exes))],
				Argv:     []string{"arg", strconv.Itoa(i)},
			}
			st := lineage.Stat{Identity: m.Identity, PGRP: 5 + rng.IntN(4), Kernel: rng.IntN(10) == 0}
			if rng.IntN(4) == 0 {
				st.Identity = randID()
			}
			if rng.IntN(8) == 0 && i > 0 { // duplicates happen
				m.Identity, st = candidates[i-1].Member.Identity, candidates[i-1].Stat
			}
			candidates[i] = Candidate{Member: m, Stat: st}
		}
		before := cloneCandidates(candidates)
		rules := randRules()
		more := append(slices.Clone(rules), randRules()...)

		s, err := Filter(caller, root, rules, candidates)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := Filter(caller, root, more, candidates)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(candidates, before) {
			t.Fatalf("iteration %d: Filter changed its input", iter)
		}
		for _, split := range []Split{s, s2} {
			seen := make([]int, len(candidates))
			for _, list := range [][]Verdict{split.Victims, split.Kept, split.Protected} {
				for _, v := range list {
					i, err := strconv.Atoi(v.Member.Comm)
					if err != nil || i < 0 || i >= len(candidates) || !reflect.DeepEqual(v.Candidate, candidates[i]) {
						t.Fatalf("iteration %d: %+v is not one of the candidates", iter, v.Candidate)
					}
					if v.Reason == "" {
						t.Errorf("iteration %d: %s has no reason", iter, v.Member.Identity)
					}
					seen[i]++
				}
			}
			for i, n := range seen {
				if n != 1 {
					t.Fatalf("iteration %d: candidate %d appears %d times in the split, want once", iter, i, n)
				}
			}
		}
		rulesOf := map[*Split]KeepRules{&s: rules, &s2: more}
		for split, r := range rulesOf {
			for _, v := range split.Victims {
				if _, p := Protect(caller, root, v.Candidate); p {
					t.Fatalf("iteration %d: victim %s is protected", iter, v.Member.Identity)
				}
				if _, k := r.Spares(v.Member); k {
					t.Fatalf("iteration %d: victim %s is spared by a rule", iter, v.Member.Identity)
				}
			}
			for _, v := range split.Kept {
				if _, k := r.Spares(v.Member); !k {
					t.Fatalf("iteration %d: %s is kept but no rule spares it", iter, v.Member.Identity)
				}
			}
			for _, v := range split.Protected {
				if _, p := Protect(caller, root, v.Candidate); !p {
					t.Fatalf("iteration %d: %s is protected but Protect disagrees", iter, v.Member.Identity)
				}
			}
		}
		// More rules never add a victim, and never change what is protected.
		victims := make(map[string]bool)
		for _, v := range s.Victims {
			victims[v.Member.Comm] = true
		}
		for _, v := range s2.Victims {
			if !victims[v.Member.Comm] {
				t.Fatalf("iteration %d: adding rules %v made %s a victim", iter, more[len(rules):], v.Member.Identity)
			}
		}
		if !reflect.DeepEqual(s.Protected, s2.Protected) {
			t.Fatalf("iteration %d: keep rules changed the protected set", iter)
		}
		// With no rules, nothing is kept.
		s0, err := Filter(caller, root, nil, candidates)
		if err != nil {
			t.Fatal(err)
		}
		if len(s0.Kept) != 0 || len(s0.Victims) < len(s.Victims) {
			t.Fatalf("iteration %d: without rules: %d kept, %d victims (with rules: %d)", iter, len(s0.Kept), len(s0.Victims), len(s.Victims))
		}
	}
}

func cloneCandidates(cs []Candidate) []Candidate {
	out := make([]Candidate, len(cs))
	for i, c := range cs {
		out[i] = c
		out[i].Member.Argv = slices.Clone(c.Member.Argv)
	}
	return out
}
