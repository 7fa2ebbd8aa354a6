// Package bpf is the BPF backend: a [Tracker] keeps, in a kernel hash map,
// the exact membership of every registered root's lineage, updated by the
// program on sched_process_fork, exec and exit, and delivers its events
// from a ring buffer. It is the only package of lineage that imports
// cilium/ebpf. The program lives in bpf/lineage.c and builds twice, lineage
// and lineage_compat; their bpf2go output (Go bindings and objects for both
// endiannesses) is committed here and rebuilt by `make generate`.
//
// Opening a Tracker needs root, or CAP_BPF with CAP_PERFMON, and a kernel
// with BTF and the BPF ring buffer (5.8 or later). Which build loads, and
// so how a reap is contained and whether a lineage dies with its
// supervisor, is decided by probing the kernel ([ProbeFeatures]), never
// from its version; [loader.ProbeHost] holds the pre-checks that decide
// whether BPF may be tried at all. doctor reads both.
//
// A tracker opened with Options.PinRoot is pinned on bpffs, under a
// directory named for [LayoutVersion], and outlives its process: the next
// one takes it over ([Tracker.Pinned]), a binary of another layout moves
// its members into a new set, and only [Unpin] ends it. A Tracker must stay
// reachable for as long as tracking must go on: when the garbage collector
// finalizes it, its descriptors close and tracking stops.
package bpf
