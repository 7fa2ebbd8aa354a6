package loader

import (
	"fmt"
	"strings"
)

// Openers open the two backends for [Open]: the BPF tracker, and the /proc
// poller. CheckBPF and CheckProc validate each one's options before
// anything opens, so that auto can't hide bad ones behind the other
// backend. Packages loader/bpf and loader/poll provide them.
type Openers struct {
	BPF       func() (Backend, error)
	Proc      func() (Backend, error)
	CheckBPF  func() error
	CheckProc func() error
}

// Open opens the backend named by choice ("auto", "bpf" or "proc"; read user
// input with [ParseBackend]) and says which one it opened and why.
//
//   - "bpf" opens the BPF backend or fails with its error, which wraps
//     ErrUnavailable when BPF can't run here and says why.
//   - "proc" opens the proc backend.
//   - "auto" opens the BPF backend when it loads, and otherwise the proc
//     backend, with the reason BPF failed in the Choice: auto never fails
//     because of BPF.
//
// An unknown choice, or bad options for a backend the choice may open
// (bpf's for "bpf" and "auto", proc's for "proc" and "auto"), fail before
// anything opens and wrap lineage.ErrInvalid. The caller
// owns the returned backend and must Close it.
func Open(choice string, open Openers) (Backend, Choice, error) {
	asked, err := ParseBackend(choice)
	if err != nil {
		return nil, Choice{}, err
	}
	if asked != BackendProc && open.CheckBPF != nil {
		if err := open.CheckBPF(); err != nil {
			return nil, Choice{}, fmt.Errorf("bpf backend: %w", err)
		}
	}
	if asked != BackendBPF && open.CheckProc != nil {
		if err := open.CheckProc(); err != nil {
			return nil, Choice{}, err
		}
	}
	var bpfErr error
	if asked != BackendProc {
		b, err := open.BPF()
		if err == nil {
			reason := "asked for bpf"
			if asked == BackendAuto {
				reason = "bpf loaded"
			}
			return b, Choice{Backend: BackendBPF, Asked: asked, Reason: reason}, nil
		}
		if asked == BackendBPF {
			return nil, Choice{}, fmt.Errorf("bpf backend: %w", err)
		}
		bpfErr = err
	}
	p, err := open.Proc()
	if err != nil {
		return nil, Choice{}, err
	}
	reason := "asked for proc"
	if bpfErr != nil {
		reason = "bpf: " + strings.TrimPrefix(bpfErr.Error(), ErrUnavailable.Error()+": ") + "; using proc"
	}
	return p, Choice{Backend: BackendProc, Asked: asked, Reason: reason}, nil
}
