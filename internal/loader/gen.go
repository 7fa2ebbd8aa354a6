package loader

// The committed outputs (lineage_bpfel.go/.o, lineage_bpfeb.go/.o) were built
// with Debian 12's clang 14.0.6 and libbpf-dev 1.1.2: `make generate`.
//go:generate go tool bpf2go -tags linux -type event -type member -type root -type stat -type event_kind -type event_flag -type member_flag -type root_flag lineage ../../bpf/lineage.c -- -mcpu=v3 -I../../bpf/headers -I../../bpf -Wall -Werror -O2 -g
