package main

import (
	"slices"
	"testing"
)

// The fork-rate conditions: none against none, the daemon idle, 1, 4 and
// 16 runs through it, then the standalone counts asked for; a bad count is
// refused.
func TestForkConditions(t *testing.T) {
	conds, err := forkRounds{standalone: "1, 16"}.conditions()
	if err != nil {
		t.Fatal(err)
	}
	want := []forkCond{{}, {daemon: true}, {true, 1}, {true, 4}, {true, 16}, {runs: 1}, {runs: 16}}
	if !slices.Equal(conds, want) {
		t.Errorf("conditions %v, want %v", conds, want)
	}
	for _, bad := range []string{"0", "x", "4,-1"} {
		if _, err := (forkRounds{standalone: bad}).conditions(); err == nil {
			t.Errorf("-daemon-fork-standalone %q was accepted", bad)
		}
	}
}

func TestQuantile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	for p, want := range map[float64]float64{0: 1, 0.25: 2, 0.5: 3, 0.75: 4, 1: 5} {
		if got := quantile(xs, p); got != want {
			t.Errorf("quantile %v: %v, want %v", p, got, want)
		}
	}
	if quantile(nil, 0.5) != 0 {
		t.Error("quantile of nothing is not 0")
	}
}
