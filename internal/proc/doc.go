// Package proc reads processes from /proc: their identities and stat fields
// ([FS], rooted anywhere so that tests can use a fake tree; stat files
// through the lean parser, the listing through prometheus/procfs, which the
// tests hold the lean parser to), a lean stat reader for pollers
// ([StatReader]), the adoption
// of a running process's descendants ([FS.Adopt]), and the boot clock that
// start times are measured on ([BootTime]).
//
// It only reads: it sends no signals and loads no BPF.
package proc
