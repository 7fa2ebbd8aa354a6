// Package loader provides the backends that tell lineage which processes
// belong to which root: the BPF tracker, which keeps membership exact in the
// kernel, and (where BPF can't load) a /proc poller.
//
// It is the only package that imports cilium/ebpf. The BPF program lives in
// bpf/lineage.c; its bpf2go output (Go bindings and objects for both
// endiannesses) is committed here and rebuilt by `make generate`.
//
// Loading the BPF backend needs root, or CAP_BPF with CAP_PERFMON, and a
// kernel with BTF (5.8 or later; 6.13 or later for in-kernel containment and
// for killing a lineage when its supervisor dies).
package loader
