package loader

import (
	"fmt"
	"strings"

	"github.com/lineage-dev/lineage/internal/lineage"
)

// The backends a user can choose with --backend.
const (
	// BackendAuto uses BPF when it loads, and the proc backend otherwise.
	BackendAuto = "auto"
	// BackendBPF uses BPF or fails, saying why.
	BackendBPF = "bpf"
	// BackendProc polls /proc, whatever BPF could do.
	BackendProc = "proc"
)

// ParseBackend checks a --backend value: "auto", "bpf" or "proc" (any case,
// surrounding spaces ignored; empty means "auto"). Other values wrap
// lineage.ErrInvalid.
func ParseBackend(s string) (string, error) {
	switch v := strings.ToLower(strings.TrimSpace(s)); v {
	case "":
		return BackendAuto, nil
	case BackendAuto, BackendBPF, BackendProc:
		return v, nil
	}
	return "", fmt.Errorf("%w option: backend %q: want auto, bpf or proc", lineage.ErrInvalid, s)
}

// Choice says which backend [Open] chose and why, in words fit for a report
// and for -v.
type Choice struct {
	// Backend is "bpf" or "proc".
	Backend string `json:"backend"`
	// Asked is what the user asked for: "auto", "bpf" or "proc".
	Asked string `json:"asked"`
	// Reason says why this backend, for example "bpf: not privileged: ...;
	// using proc".
	Reason string `json:"reason"`
}

func (c Choice) String() string { return c.Backend + " (" + c.Reason + ")" }
