package main

import (
	"fmt"
	"os"
	"sync/atomic"

	"github.com/lineage-dev/lineage/internal/guardian"
	"github.com/lineage-dev/lineage/internal/lineage"
	"github.com/lineage-dev/lineage/internal/loader"
	"github.com/lineage-dev/lineage/internal/policy"
)

// How a hard cancel (lineage SIGKILLed with its process group) is answered:
// the hidden --hard-cancel flag.
const (
	// hardCancelAuto: the kernel's exit hook where it can kill (bpf,
	// kernel 6.13+), a guardian otherwise.
	hardCancelAuto = "auto"
	// hardCancelGuardian: a guardian, never the kernel (tests; it is how
	// an older kernel behaves).
	hardCancelGuardian = "guardian"
)

// kernelHardCancel reports whether the kernel ends the lineage by itself
// when lineage dies.
func kernelHardCancel(o *runOptions, backend loader.Backend) bool {
	k, ok := backend.(interface{ KernelContainment() bool })
	return o.HardCancel != hardCancelGuardian && ok && k.KernelContainment()
}

// startGuardian starts the job's guardian when a hard cancel would
// otherwise leave the lineage running: with the proc backend before the job
// (beforeJob), which it must see first; with bpf after, beside the running
// job. It returns nil when no guardian is wanted now or it could not start
// (then it says so).
func startGuardian(o *runOptions, backend loader.Backend, caller policy.Caller, beforeJob bool) *guardian.Guardian {
	bpf, isBPF := backend.(*loader.BPF)
	if o.KeepOnAbort || o.reaping.Off || kernelHardCancel(o, backend) || beforeJob == isBPF {
		return nil
	}
	cfg := guardian.Config{
		Args:   []string{guardianCommand},
		Caller: caller, Keep: o.keep, Reaping: o.reaping, Grace: o.Grace,
	}
	if f, ok := o.s.err.(*os.File); ok {
		cfg.Stderr = f
	}
	var err error
	if cfg.Path, err = os.Executable(); err == nil && isBPF {
		cfg.KernelContainment = bpf.KernelContainment()
		cfg.Handoff, err = bpf.HandoffFiles()
	}
	var g *guardian.Guardian
	if err == nil {
		g, err = guardian.Start(cfg)
	}
	if err == nil && !isBPF {
		// A scan that sees the guardian now keeps the proc backend from
		// taking it for an orphan of the job.
		_, err = backend.Members(lineage.Identity{})
	}
	if err != nil {
		fmt.Fprintf(o.s.err, "lineage: no guardian: a hard cancel would leave the job's lineage running: %v\n", err)
		if g != nil {
			_ = g.Done()
		}
		return nil
	}
	if o.Verbose {
		fmt.Fprintf(o.s.err, "lineage: guardian %d reaps the lineage if lineage is killed\n", g.PID())
	}
	return g
}

// guardJob names the job to the guardian, if there is one, and from then
// on streams the tree's new members to it through stream (proc).
func guardJob(g *guardian.Guardian, root lineage.Identity, tree *lineage.Tree, stream *atomic.Pointer[guardian.Guardian]) {
	if g == nil {
		return
	}
	g.Root(root)
	// Every member is in the tree now, or will be applied after the
	// pointer is set and so be streamed.
	stream.Store(g)
	for _, m := range tree.Live(root) {
		g.Member(m.Identity)
	}
}

// streamForks passes each new member to the guardian, if there is one.
func streamForks(stream *atomic.Pointer[guardian.Guardian], ev lineage.Event) {
	if ev.Kind != lineage.EventFork {
		return
	}
	if g := stream.Load(); g != nil {
		g.Member(ev.Process)
	}
}
