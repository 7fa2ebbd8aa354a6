package bpf

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/lineage-dev/lineage/internal/loader"
	"golang.org/x/sys/unix"
)

// explainLoadError wraps a failed load or attach of variant v with what
// actually failed: the verifier's own last words when it refused the
// program, the pre-check that explains a permission error, or the missing
// kernel feature.
func explainLoadError(v loader.Variant, host loader.Host, err error) error {
	if v == loader.VariantAuto {
		v = "tracker"
	}
	var verr *ebpf.VerifierError
	switch {
	case errors.As(err, &verr):
		return fmt.Errorf("%w: the kernel's verifier refused the %s program (%s; kernel %s): %w",
			loader.ErrUnavailable, v, verifierGist(verr), host.Release, err)
	case errors.Is(err, unix.EPERM) || errors.Is(err, os.ErrPermission):
		if !host.Privileged() {
			return fmt.Errorf("%w: not privileged: the bpf backend needs root, or CAP_BPF and CAP_PERFMON: %w", loader.ErrUnavailable, err)
		}
		if host.LockdownRefuses() {
			return fmt.Errorf("%w: kernel lockdown is %q, which refuses BPF tracing: %w", loader.ErrUnavailable, host.Lockdown, err)
		}
		return fmt.Errorf("%w: the kernel refused the %s program (a security module or a sysctl such as kernel.unprivileged_bpf_disabled may forbid it): %w", loader.ErrUnavailable, v, err)
	case errors.Is(err, ebpf.ErrNotSupported):
		return fmt.Errorf("%w: the kernel lacks a BPF feature the %s program needs: %w", loader.ErrUnavailable, v, err)
	}
	return fmt.Errorf("%w: %s program: %w", loader.ErrUnavailable, v, err)
}

// verifierGist returns the line of a verifier log that says why it refused:
// the last one, unless that is only the count of processed instructions.
func verifierGist(verr *ebpf.VerifierError) string {
	for i := len(verr.Log) - 1; i >= 0; i-- {
		line := strings.TrimSpace(verr.Log[i])
		if line == "" || strings.HasPrefix(line, "processed ") || strings.HasPrefix(line, "verification time") ||
			strings.HasPrefix(line, "stack depth") {
			continue
		}
		return line
	}
	return verr.Cause.Error()
}
