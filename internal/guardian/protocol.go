package guardian

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	"github.com/lineage-dev/lineage/lineage"
	"github.com/lineage-dev/lineage/policy"
)

// The protocol is JSON, one message a line, from lineage to the guardian:
// one hello first, then the job's root once it runs, then members (proc
// backend only), then done. Nothing flows back.
const (
	// version is the protocol's; a guardian refuses any other.
	version = 1
	// MaxLine bounds one message, newline included.
	MaxLine = 64 << 10
	// maxGrace bounds the grace a hello may ask for.
	maxGrace = 10 * time.Minute
)

// Backends as the hello names them.
const (
	backendBPF  = "bpf"
	backendProc = "proc"
)

// hello is the first message: what the guardian needs to reap the job.
type hello struct {
	Version int              `json:"version"`
	Caller  policy.Caller    `json:"caller"`
	Keep    policy.KeepRules `json:"keep,omitempty"`
	Reaping policy.Reaping   `json:"reaping"`
	Grace   time.Duration    `json:"grace"`
	Backend string           `json:"backend"`
	// Files is how many handoff descriptors follow the control pipe
	// (bpf); Containment is how the loaded program contains a lineage.
	Files       int                 `json:"files,omitempty"`
	Containment lineage.Containment `json:"containment,omitempty"`
}

// message is one line: exactly one of its fields is set.
type message struct {
	Hello  *hello            `json:"hello,omitempty"`
	Root   *lineage.Identity `json:"root,omitempty"`
	Member *lineage.Identity `json:"member,omitempty"`
	Done   bool              `json:"done,omitempty"`
}

// encode renders m as one line.
func encode(m message) []byte {
	b, err := json.Marshal(m)
	if err != nil {
		// Only our own types go in, and all of them marshal.
		panic(fmt.Sprintf("guardian: encode: %v", err))
	}
	return append(b, '\n')
}

// decode reads one line (without its newline). Anything but exactly one
// well-formed message wraps lineage.ErrInvalid.
func decode(line []byte) (message, error) {
	var m message
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&m); err != nil {
		return message{}, fmt.Errorf("%w message: %w", lineage.ErrInvalid, err)
	}
	if dec.More() {
		return message{}, fmt.Errorf("%w message: trailing data", lineage.ErrInvalid)
	}
	n := 0
	for _, set := range []bool{m.Hello != nil, m.Root != nil, m.Member != nil, m.Done} {
		if set {
			n++
		}
	}
	if n != 1 {
		return message{}, fmt.Errorf("%w message: %d kinds set, want one of hello, root, member, done", lineage.ErrInvalid, n)
	}
	for what, id := range map[string]*lineage.Identity{"root": m.Root, "member": m.Member} {
		if id == nil {
			continue
		}
		if err := id.Validate(); err != nil {
			return message{}, fmt.Errorf("%w %s: %w", lineage.ErrInvalid, what, err)
		}
	}
	if m.Hello != nil {
		if err := m.Hello.validate(); err != nil {
			return message{}, err
		}
	}
	return m, nil
}

// validate checks what a guardian would act on; errors wrap
// lineage.ErrInvalid.
func (h *hello) validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w hello: "+format, append([]any{lineage.ErrInvalid}, args...)...)
	}
	switch {
	case h.Version != version:
		return bad("protocol version %d, want %d", h.Version, version)
	case h.Caller.Validate() != nil:
		return bad("%v", h.Caller.Validate())
	case h.Grace <= 0 || h.Grace > maxGrace:
		return bad("grace %v: want more than 0 and at most %v", h.Grace, maxGrace)
	case h.Backend == backendProc && (h.Files != 0 || h.Containment != ""):
		return bad("the proc backend hands over no descriptors")
	case h.Backend == backendBPF && h.Containment != lineage.ContainKernel && h.Containment != lineage.ContainKernelForker:
		return bad("containment %q, want %s or %s", h.Containment, lineage.ContainKernel, lineage.ContainKernelForker)
	case h.Backend == backendBPF && h.Files < 2:
		// The loader bounds the count from above when it takes them over.
		return bad("%d bpf descriptors, want at least the two maps", h.Files)
	case h.Backend != backendProc && h.Backend != backendBPF:
		return bad("backend %q, want bpf or proc", h.Backend)
	}
	return nil
}
