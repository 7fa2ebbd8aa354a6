package lineage

import "syscall"

// Stat is the part of /proc/PID/stat lineage uses.
type Stat struct {
	Identity
	PPID    int
	PGRP    int
	Session int
	State   string
	Comm    string
	// Kernel is set for kernel threads (PF_KTHREAD).
	Kernel bool
	// Exiting is set while the process's leader thread is in exit(2)
	// (PF_EXITING), before it shows as a zombie.
	Exiting bool
	// Threads is field 20, the number of threads. A process whose leader
	// thread has exited shows state Z while its other threads run on; it
	// is alive, and counts more than one thread.
	Threads int
	// StartStack is field 28, the address of the bottom of the stack. A
	// new program gets a new stack, at a new random address where address
	// space layout randomisation is on, so a change means an exec. It is
	// 0 for zombies, kernel threads, and processes the reader may not
	// inspect (another user's, without privileges).
	StartStack uint64
	// ExitCode is field 52: a zombie's wait status ((code << 8) | signal),
	// 0 while the process lives or when the reader may not inspect it.
	// Only the proc package's StatReader reads it; its procfs reader leaves it 0, as procfs does
	// not parse that field.
	ExitCode ExitStatus
	// SigIgnore and SigCatch are fields 33 and 34: the signals the process
	// ignores and catches, bit sig-1 for signal sig, signals 1-31 only (the
	// kernel masks the rest out of this file). Only the proc package's
	// StatReader reads them.
	SigIgnore, SigCatch uint64
	// ArgEnd is field 49, where the program's arguments end in its memory.
	// It is 0 in the middle of an exec, from the moment the kernel gives
	// the process its new address space until it has laid out the new
	// program's arguments, and for zombies, kernel threads and processes
	// the reader may not inspect.
	ArgEnd uint64
}

// Ignores reports whether st showed sig ignored.
func (s Stat) Ignores(sig syscall.Signal) bool { return sigBit(s.SigIgnore, sig) }

// Catches reports whether st showed a handler for sig.
func (s Stat) Catches(sig syscall.Signal) bool { return sigBit(s.SigCatch, sig) }

func sigBit(mask uint64, sig syscall.Signal) bool {
	return sig >= 1 && sig <= 64 && mask&(1<<(sig-1)) != 0
}

// Zombie reports whether the process has exited and only waits to be
// reaped. A zombie leader whose other threads still run is not one.
func (s Stat) Zombie() bool { return (s.State == "Z" || s.State == "X") && s.Threads <= 1 }
