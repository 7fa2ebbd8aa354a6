// Package loader says what a backend is: the [Backend] interface that tells
// lineage which processes belong to which root, and keeps telling as they
// fork, exec and exit; its options and their parsers; the [Choice] a report
// shows and the [Stats] it counts; the kernel facts that decide whether BPF
// may be tried ([Host], [ProbeHost]) and which build of the program a
// kernel can run ([Features], [Variant], [HardCancelMode]); and [Open],
// which picks a backend as --backend asks, falling back from BPF to /proc
// under "auto" and saying why.
//
// The backends themselves live below it: package loader/bpf, the BPF
// tracker that keeps membership exact in the kernel (the only importer of
// cilium/ebpf), and package loader/poll, the /proc poller used where BPF
// can't load. This package links neither, so every binary of lineage may
// use it. Its values are plain data, safe to share once built.
package loader
