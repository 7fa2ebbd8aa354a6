// Package proc reads processes from /proc: their identities and stat fields
// ([FS], through prometheus/procfs, rooted anywhere so that tests can use a
// fake tree), a lean stat reader for pollers ([StatReader]), the adoption
// of a running process's descendants ([FS.Adopt]), and the boot clock that
// start times are measured on ([BootTime]).
//
// It only reads: it sends no signals and loads no BPF.
package proc
