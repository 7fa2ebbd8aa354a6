package bpf

// Two builds of bpf/lineage.c, one Go type for both (see variantSpec in
// tracker_linux.go):
// lineage, and lineageCompat for kernels without the kfuncs and callbacks.
// Only the first generates the shared types; the second's objects are
// loaded into lineageObjects. And bpf/inspect.c, the reaper's batch check
// (inspect_linux.go), which shares nothing with them.
//
// The committed outputs (lineage_bpfel.go/.o, lineage_bpfeb.go/.o,
// lineagecompat_bpfel.go/.o, lineagecompat_bpfeb.go/.o, inspect_bpfel.go/.o,
// inspect_bpfeb.go/.o) were built with
// Debian 12's clang 14.0.6, llvm 14 and libbpf-dev 1.1.2: `make generate`.
//go:generate go tool bpf2go -tags linux -type event -type exec_event -type drop_log -type lost -type member -type root -type arm -type keep_exe -type stat -type event_kind -type event_flag -type member_flag -type root_flag lineage ../../../bpf/lineage.c -- -mcpu=v3 -I../../../bpf/headers -I../../../bpf -Wall -Werror -O2 -g
//go:generate go tool bpf2go -tags linux -no-global-types lineageCompat ../../../bpf/lineage.c -- -DLINEAGE_COMPAT -mcpu=v3 -I../../../bpf/headers -I../../../bpf -Wall -Werror -O2 -g
//go:generate go tool bpf2go -tags linux -type batch -type proc_stat -type proc_flag inspect ../../../bpf/inspect.c -- -mcpu=v3 -I../../../bpf/headers -I../../../bpf -Wall -Werror -O2 -g
//go:generate go run ../../buildinfo/gendigest -o ../../buildinfo/bpfdigest.go lineage=lineage_bpfel.o lineagecompat=lineagecompat_bpfel.o inspect=inspect_bpfel.o
