// Package loader provides the backends that tell lineage which processes
// belong to which root: the BPF tracker, which keeps membership exact in the
// kernel, and (where BPF can't load) a /proc poller.
//
// It is the only package that imports cilium/ebpf. The BPF program lives in
// bpf/lineage.c and builds twice, lineage and lineage_compat; their bpf2go
// output (Go bindings and objects for both endiannesses) is committed here
// and rebuilt by `make generate`.
//
// Loading the BPF backend needs root, or CAP_BPF with CAP_PERFMON, and a
// kernel with BTF and the BPF ring buffer (5.8 or later). Which build loads,
// and so how a reap is contained and whether a lineage dies with its
// supervisor, is decided by probing the kernel ([ProbeFeatures], [Variant],
// [HardCancelMode]), never from its version; [ProbeHost] holds the
// pre-checks that decide whether BPF may be tried at all. doctor reads both.
//
// A tracker opened with BPFOptions.PinRoot is pinned on bpffs, under a
// directory named for [LayoutVersion], and outlives its process: the next
// one takes it over ([Pinned]), a binary of another layout moves its
// members into a new set, and only [Unpin] ends it.
package loader
