package poll

import (
	"testing"
	"time"
)

func TestProcAdaptiveInterval(t *testing.T) {
	pc := newProcPacer((&Options{}).withDefaults())
	for _, tc := range []struct {
		cost, want time.Duration
	}{
		{100 * time.Microsecond, DefaultMinInterval},     // floor
		{5 * time.Millisecond, 125 * time.Millisecond},   // 5 ms / (80 % of 5 %)
		{60 * time.Millisecond, 1500 * time.Millisecond}, // a rise is followed at once
		{10 * time.Second, DefaultMaxInterval},           // ceiling
	} {
		if got := pc.observe(tc.cost); got != tc.want {
			t.Errorf("scan cost %v: interval %v, want %v", tc.cost, got, tc.want)
		}
	}
	// A fall is followed slowly.
	if got := pc.observe(time.Millisecond); got < DefaultMaxInterval/2 {
		t.Errorf("interval fell to %v after one cheap scan", got)
	}
	fixed := newProcPacer((&Options{Interval: 3 * time.Second}).withDefaults())
	if got := fixed.observe(time.Hour); got != 3*time.Second || fixed.adaptive() {
		t.Errorf("fixed interval: %v, adaptive %v", got, fixed.adaptive())
	}
}
