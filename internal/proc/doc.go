// Package proc reads processes from /proc with plain file reads: a
// process's stat ([ReadStat], parsed by [lineage.ParseStat]) and command
// line ([ReadArgv]), the calling process's identity ([Self]), an [FS]
// rooted anywhere so that tests can use a fake tree, a stat reader for
// pollers that keeps each process's stat file open ([StatReader]), the
// adoption of a running process's descendants ([FS.Adopt]), and the boot
// clock that start times are measured on ([BootTime]). The tests hold its
// parser to prometheus/procfs's.
//
// It only reads: it sends no signals and loads no BPF. It links no /proc
// library, so every binary of lineage may use it. Its functions and an FS
// are safe for concurrent use; a StatReader is not.
package proc
