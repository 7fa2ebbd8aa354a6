package policy

import (
	"fmt"
	"strings"

	"github.com/lineage-dev/lineage/lineage"
)

// EnvReaping is the environment variable of the kill switch.
const EnvReaping = "LINEAGE_REAPING"

// KillSwitch is one source's setting of reaping: unset, on or off.
type KillSwitch uint8

const (
	// ReapingUnset: this source says nothing; the next one decides.
	ReapingUnset KillSwitch = iota
	// ReapingOn: reap when policy says so.
	ReapingOn
	// ReapingOff: never reap; every would-be reap becomes a report.
	ReapingOff
)

// String returns "on", "off" or "unset".
func (k KillSwitch) String() string {
	switch k {
	case ReapingUnset:
		return "unset"
	case ReapingOn:
		return "on"
	case ReapingOff:
		return "off"
	}
	return fmt.Sprintf("KillSwitch(%d)", uint8(k))
}

// ParseKillSwitch reads the words people use for a switch, in any case and
// with surrounding space ignored: off, 0, false, no and disabled are
// [ReapingOff]; on, 1, true, yes and enabled are [ReapingOn]. The empty (or
// all-space) string is [ReapingUnset]. Anything else ("maybe", "of") is an
// error wrapping [lineage.ErrInvalid]: a switch that stops killing must not
// be guessed at.
func ParseKillSwitch(s string) (KillSwitch, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return ReapingUnset, nil
	case "on", "1", "true", "yes", "enabled":
		return ReapingOn, nil
	case "off", "0", "false", "no", "disabled":
		return ReapingOff, nil
	}
	return ReapingUnset, fmt.Errorf("%w kill switch %q: want on or off (or 1, true, yes, enabled; 0, false, no, disabled)", lineage.ErrInvalid, s)
}

// KillSwitchFromEnv reads LINEAGE_REAPING through getenv (os.Getenv in
// production, a map lookup in tests). Unset and empty are [ReapingUnset]; a
// bad value is an error naming the variable and wrapping [lineage.ErrInvalid].
func KillSwitchFromEnv(getenv func(string) string) (KillSwitch, error) {
	k, err := ParseKillSwitch(getenv(EnvReaping))
	if err != nil {
		return ReapingUnset, fmt.Errorf("%s: %w", EnvReaping, err)
	}
	return k, nil
}

// Setting is the kill switch as a lower-precedence source set it: a flag or
// a configuration key. Source names it as the user wrote it ("--reaping").
type Setting struct {
	Source string
	Switch KillSwitch
}

// Reaping is the kill switch resolved from all its sources. The zero value
// is reaping on by default.
type Reaping struct {
	// Off is set when reaping is off: [Decide] turns every reap into a report.
	Off bool
	// By names the setting that decided, as the user wrote it
	// ("LINEAGE_REAPING=off", "--reaping=on"); empty for the default.
	By string
}

// String reads like "off (LINEAGE_REAPING=off)" or "on (default)".
func (r Reaping) String() string {
	s := "on"
	if r.Off {
		s = "off"
	}
	by := r.By
	if by == "" {
		by = "default"
	}
	return s + " (" + by + ")"
}

// ResolveReaping combines the environment's kill switch with the other
// settings, given in decreasing precedence (flag, then configuration). The
// environment wins whenever it is set; otherwise the first set setting
// wins; otherwise reaping is on. A value that is neither unset nor on counts
// as off: an unknown setting never enables killing.
func ResolveReaping(env KillSwitch, lower ...Setting) Reaping {
	if env != ReapingUnset {
		return Reaping{Off: env != ReapingOn, By: EnvReaping + "=" + env.String()}
	}
	for _, s := range lower {
		if s.Switch != ReapingUnset {
			return Reaping{Off: s.Switch != ReapingOn, By: s.Source + "=" + s.Switch.String()}
		}
	}
	return Reaping{}
}
