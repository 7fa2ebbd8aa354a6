package bpf

import (
	"errors"
	"fmt"
	"strings"
	"syscall"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/lineage-dev/lineage/internal/loader"
)

// TestExplainLoadErrorSaysWhatFailed: a verifier refusal names the variant
// and the verifier's own reason, not a feature the kernel has.
func TestExplainLoadErrorSaysWhatFailed(t *testing.T) {
	host := loader.Host{Release: "6.1.0-57-cloud-amd64", Caps: 1<<41 - 1}
	verr := &ebpf.VerifierError{Cause: syscall.EINVAL, Log: []string{
		"169: (b4) w0 = 0", "170: (95) exit", "Unreleased reference id=4 alloc_insn=83",
		"processed 155 insns (limit 1000000) max_states_per_insn 1 total_states 12 peak_states 12 mark_read 3", "",
	}}
	for _, c := range []struct {
		name string
		host loader.Host
		err  error
		want []string
	}{
		{"verifier", host, fmt.Errorf("load bpf program: %w", verr),
			[]string{"verifier refused the compat program", "Unreleased reference id=4", "kernel 6.1.0-57-cloud-amd64"}},
		{"not privileged", loader.Host{Euid: 1000}, syscall.EPERM, []string{"not privileged"}},
		{"lockdown", loader.Host{Caps: 1<<41 - 1, Lockdown: loader.LockdownConfidentiality}, syscall.EPERM, []string{`lockdown is "confidentiality"`}},
		{"refused otherwise", host, syscall.EPERM, []string{"refused the compat program", "security module"}},
		{"missing feature", host, fmt.Errorf("kfunc: %w", ebpf.ErrNotSupported), []string{"lacks a BPF feature the compat program needs"}},
	} {
		err := explainLoadError(loader.VariantCompat, c.host, c.err)
		if !errors.Is(err, loader.ErrUnavailable) || !errors.Is(err, c.err) {
			t.Errorf("%s: %v does not wrap ErrUnavailable and the cause", c.name, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q lacks %q", c.name, err, w)
			}
		}
	}
}
