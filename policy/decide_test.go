package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

// TestDecide is the decision table. Each row reads: runtime, event, kill
// switch (LINEAGE_REAPING), root kept on purpose → action, and a piece of
// the reason. Runtime "-" is none given (a `lineage run` job).
func TestDecide(t *testing.T) {
	table := []struct {
		runtime, event, reaping, kept string
		action, why                   string
	}{
		// runtime      event            switch  kept      action    reason
		{"interactive", "turn-end", "on", "-", "report", "reported, not killed"},
		{"interactive", "turn-end", "on", "kept", "report", "reported, not killed"},
		{"interactive", "turn-end", "off", "-", "report", "reported, not killed"},
		{"interactive", "turn-end", "off", "kept", "report", "reported, not killed"},
		{"interactive", "session-close", "on", "-", "reap", "the session closed"},
		{"interactive", "session-close", "on", "kept", "report", "kept on purpose"},
		{"interactive", "session-close", "off", "-", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"interactive", "session-close", "off", "kept", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"interactive", "deadline", "on", "-", "reap", "the deadline passed"},
		{"interactive", "deadline", "on", "kept", "report", "kept on purpose"},
		{"interactive", "deadline", "off", "-", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"interactive", "deadline", "off", "kept", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"interactive", "root-exit", "on", "-", "report", "leftovers are reported, not killed"},
		{"interactive", "root-exit", "on", "kept", "report", "leftovers are reported, not killed"},
		{"interactive", "root-exit", "off", "-", "report", "leftovers are reported, not killed"},
		{"interactive", "root-exit", "off", "kept", "report", "leftovers are reported, not killed"},

		{"autonomous", "turn-end", "on", "-", "reap", "an autonomous turn ended"},
		{"autonomous", "turn-end", "on", "kept", "report", "kept on purpose"},
		{"autonomous", "turn-end", "off", "-", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"autonomous", "turn-end", "off", "kept", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"autonomous", "session-close", "on", "-", "reap", "the session closed"},
		{"autonomous", "session-close", "on", "kept", "report", "kept on purpose"},
		{"autonomous", "session-close", "off", "-", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"autonomous", "session-close", "off", "kept", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"autonomous", "deadline", "on", "-", "reap", "the deadline passed"},
		{"autonomous", "deadline", "on", "kept", "report", "kept on purpose"},
		{"autonomous", "deadline", "off", "-", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"autonomous", "deadline", "off", "kept", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"autonomous", "root-exit", "on", "-", "reap", "the root exited"},
		{"autonomous", "root-exit", "on", "kept", "report", "kept on purpose"},
		{"autonomous", "root-exit", "off", "-", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"autonomous", "root-exit", "off", "kept", "report", "reaping is off: LINEAGE_REAPING=off"},

		{"-", "turn-end", "on", "-", "skip", "turn-end needs a runtime kind"},
		{"-", "turn-end", "on", "kept", "skip", "turn-end needs a runtime kind"},
		{"-", "turn-end", "off", "-", "skip", "turn-end needs a runtime kind"},
		{"-", "turn-end", "off", "kept", "skip", "turn-end needs a runtime kind"},
		{"-", "session-close", "on", "-", "reap", "the session closed"},
		{"-", "session-close", "on", "kept", "report", "kept on purpose"},
		{"-", "session-close", "off", "-", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"-", "session-close", "off", "kept", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"-", "deadline", "on", "-", "reap", "the deadline passed"},
		{"-", "deadline", "on", "kept", "report", "kept on purpose"},
		{"-", "deadline", "off", "-", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"-", "deadline", "off", "kept", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"-", "root-exit", "on", "-", "reap", "the root exited"},
		{"-", "root-exit", "on", "kept", "report", "kept on purpose"},
		{"-", "root-exit", "off", "-", "report", "reaping is off: LINEAGE_REAPING=off"},
		{"-", "root-exit", "off", "kept", "report", "reaping is off: LINEAGE_REAPING=off"},

		// An unset switch is the default: on.
		{"autonomous", "turn-end", "", "-", "reap", "an autonomous turn ended"},
		{"interactive", "session-close", "", "-", "reap", "the session closed"},
	}

	type key struct{ runtime, event, reaping, kept string }
	covered := make(map[key]bool)
	for _, row := range table {
		name := strings.Join([]string{row.runtime, row.event, "reaping=" + row.reaping, "kept=" + row.kept}, "/")
		covered[key{row.runtime, row.event, row.reaping, row.kept}] = true
		t.Run(name, func(t *testing.T) {
			in := Input{Kept: row.kept == "kept"}
			if row.runtime != "-" {
				in.Kind = kindNamed(t, row.runtime)
			}
			in.Event = eventNamed(t, row.event)
			env, err := KillSwitchFromEnv(envOf(row.reaping))
			if err != nil {
				t.Fatal(err)
			}
			in.Reaping = ResolveReaping(env)

			got := Decide(in)
			if got.Action.String() != row.action {
				t.Errorf("Decide(%+v) = %v, want %s", in, got, row.action)
			}
			if !strings.Contains(got.Reason, row.why) {
				t.Errorf("Decide(%+v) reason %q, want it to contain %q", in, got.Reason, row.why)
			}
		})
	}

	// The table must cover every combination, so a new kind or event can't
	// slip in undecided.
	for _, runtime := range []string{"interactive", "autonomous", "-"} {
		for _, event := range []string{"turn-end", "session-close", "deadline", "root-exit"} {
			for _, reaping := range []string{"on", "off"} {
				for _, kept := range []string{"-", "kept"} {
					if !covered[key{runtime, event, reaping, kept}] {
						t.Errorf("decision table lacks the row %s %s %s %s", runtime, event, reaping, kept)
					}
				}
			}
		}
	}
	if len(kindNames) != 2 || len(eventNames) != 4 {
		t.Errorf("kinds or events changed: extend the decision table")
	}
}

// envOf returns a getenv that knows only LINEAGE_REAPING=v ("" = unset).
func envOf(v string) func(string) string {
	return func(name string) string {
		if name == EnvReaping {
			return v
		}
		return ""
	}
}

func TestDecideInvalid(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		why  string
	}{
		{"zero input", Input{}, "no event"},
		{"unknown event", Input{Kind: Autonomous, Event: Event(9)}, "unknown Event(9)"},
		{"unknown kind", Input{Kind: Kind(9), Event: Deadline}, "unknown Kind(9)"},
		{"turn end without kind", Input{Event: TurnEnd}, "turn-end needs a runtime kind"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.in.Validate()
			if !errors.Is(err, lineage.ErrInvalid) {
				t.Errorf("Validate() = %v, want lineage.ErrInvalid", err)
			}
			d := Decide(tt.in)
			if d.Action != Skip || !strings.HasPrefix(d.Reason, "nothing to decide") || !strings.Contains(d.Reason, tt.why) {
				t.Errorf("Decide() = %v, want skip: nothing to decide: ...%s", d, tt.why)
			}
		})
	}
	if (Decision{}).Action != Skip {
		t.Error("the zero Decision must be skip")
	}
}

func TestDecideReapingReason(t *testing.T) {
	tests := []struct {
		reaping Reaping
		want    string
	}{
		{ResolveReaping(ReapingUnset, Setting{"--reaping", ReapingOff}), "reaping is off: --reaping=off (would reap: the deadline passed)"},
		{ResolveReaping(ReapingOff, Setting{"--reaping", ReapingOn}), "reaping is off: LINEAGE_REAPING=off (would reap: the deadline passed)"},
		{Reaping{Off: true}, "reaping is off (would reap: the deadline passed)"},
	}
	for _, tt := range tests {
		d := Decide(Input{Event: Deadline, Reaping: tt.reaping})
		if d.Action != Report || d.Reason != tt.want {
			t.Errorf("Decide(deadline, %v) = %v, want report: %s", tt.reaping, d, tt.want)
		}
	}
}

// kindNamed and eventNamed read the table's names through String, so the
// table also checks the names the decision's reason uses.
func kindNamed(t *testing.T, name string) Kind {
	t.Helper()
	for _, k := range []Kind{Interactive, Autonomous} {
		if k.String() == name {
			return k
		}
	}
	t.Fatalf("no runtime kind is named %q", name)
	return 0
}

func eventNamed(t *testing.T, name string) Event {
	t.Helper()
	for _, e := range []Event{TurnEnd, SessionClose, Deadline, RootExit} {
		if e.String() == name {
			return e
		}
	}
	t.Fatalf("no event is named %q", name)
	return 0
}
