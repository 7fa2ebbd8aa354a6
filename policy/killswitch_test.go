package policy

import (
	"errors"
	"strings"
	"testing"

	"github.com/lineage-dev/lineage/lineage"
)

func TestKillSwitchFromEnv(t *testing.T) {
	tests := []struct {
		env     string
		want    KillSwitch
		wantErr bool
	}{
		{"", ReapingUnset, false},
		{"on", ReapingOn, false},
		{"off", ReapingOff, false},
		{"maybe", ReapingUnset, true},
		{"OFF", ReapingOff, false},
		{"0", ReapingOff, false},
		{"off ", ReapingOff, false},
		{" \tDisabled\n", ReapingOff, false},
		{"false", ReapingOff, false},
		{"No", ReapingOff, false},
		{"ON", ReapingOn, false},
		{"1", ReapingOn, false},
		{" true ", ReapingOn, false},
		{"YES", ReapingOn, false},
		{"enabled", ReapingOn, false},
		{"  ", ReapingUnset, false},
		{"unset", ReapingUnset, true},
		{"of", ReapingUnset, true},
		{"2", ReapingUnset, true},
		{"nope", ReapingUnset, true},
	}
	for _, tt := range tests {
		t.Run(tt.env, func(t *testing.T) {
			got, err := KillSwitchFromEnv(envOf(tt.env))
			if tt.wantErr {
				if !errors.Is(err, lineage.ErrInvalid) {
					t.Fatalf("KillSwitchFromEnv(%q) error = %v, want lineage.ErrInvalid", tt.env, err)
				}
				for _, part := range []string{EnvReaping, `"` + tt.env + `"`, "want on or off"} {
					if !strings.Contains(err.Error(), part) {
						t.Errorf("error %q does not contain %q", err, part)
					}
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("KillSwitchFromEnv(%q) = %v, %v; want %v", tt.env, got, err, tt.want)
			}
		})
	}
}

func TestKillSwitchFromEnvReadsOnlyItsVariable(t *testing.T) {
	var asked []string
	_, err := KillSwitchFromEnv(func(name string) string {
		asked = append(asked, name)
		return "off"
	})
	if err != nil || len(asked) != 1 || asked[0] != "LINEAGE_REAPING" {
		t.Errorf("asked for %v (err %v), want only LINEAGE_REAPING", asked, err)
	}
}

// TestResolveReaping: the environment wins over the flag and configuration,
// both ways; the flag wins over configuration; nothing set means on.
func TestResolveReaping(t *testing.T) {
	tests := []struct {
		env, flag, config KillSwitch
		want              Reaping
	}{
		{ReapingUnset, ReapingUnset, ReapingUnset, Reaping{}},
		{ReapingOff, ReapingUnset, ReapingUnset, Reaping{Off: true, By: "LINEAGE_REAPING=off"}},
		{ReapingOff, ReapingOn, ReapingOn, Reaping{Off: true, By: "LINEAGE_REAPING=off"}},
		{ReapingOn, ReapingOff, ReapingOff, Reaping{By: "LINEAGE_REAPING=on"}},
		{ReapingUnset, ReapingOff, ReapingOn, Reaping{Off: true, By: "--reaping=off"}},
		{ReapingUnset, ReapingOn, ReapingOff, Reaping{By: "--reaping=on"}},
		{ReapingUnset, ReapingUnset, ReapingOff, Reaping{Off: true, By: "reaping=off"}},
		// An unknown value never turns killing on.
		{KillSwitch(7), ReapingOn, ReapingUnset, Reaping{Off: true, By: "LINEAGE_REAPING=KillSwitch(7)"}},
		{ReapingUnset, KillSwitch(7), ReapingOn, Reaping{Off: true, By: "--reaping=KillSwitch(7)"}},
	}
	for _, tt := range tests {
		got := ResolveReaping(tt.env, Setting{"--reaping", tt.flag}, Setting{"reaping", tt.config})
		if got != tt.want {
			t.Errorf("ResolveReaping(env %v, flag %v, config %v) = %+v, want %+v", tt.env, tt.flag, tt.config, got, tt.want)
		}
	}
}

// TestKillSwitchDecides runs the switch end to end, both ways: from the
// environment to the decision for an autonomous turn end.
func TestKillSwitchDecides(t *testing.T) {
	tests := []struct {
		env, flag string
		want      Action
		why       string
	}{
		{"off", "on", Report, "reaping is off: LINEAGE_REAPING=off"},
		{"on", "off", Reap, "an autonomous turn ended"},
		{"", "off", Report, "reaping is off: --reaping=off"},
		{"", "", Reap, "an autonomous turn ended"},
	}
	for _, tt := range tests {
		env, err := KillSwitchFromEnv(envOf(tt.env))
		if err != nil {
			t.Fatal(err)
		}
		flag, err := ParseKillSwitch(tt.flag)
		if err != nil {
			t.Fatal(err)
		}
		d := Decide(Input{Kind: Autonomous, Event: TurnEnd, Reaping: ResolveReaping(env, Setting{"--reaping", flag})})
		if d.Action != tt.want || !strings.HasPrefix(d.Reason, tt.why) {
			t.Errorf("env %q flag %q: %v, want %v: %s...", tt.env, tt.flag, d, tt.want, tt.why)
		}
	}
}

func TestReapingString(t *testing.T) {
	for _, tt := range []struct {
		r    Reaping
		want string
	}{
		{Reaping{}, "on (default)"},
		{Reaping{Off: true, By: "LINEAGE_REAPING=off"}, "off (LINEAGE_REAPING=off)"},
	} {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.r, got, tt.want)
		}
	}
}
