package lineage

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
}

// Zombie reports whether the process has exited and only waits to be
// reaped. A zombie leader whose other threads still run is not one.
func (s Stat) Zombie() bool { return (s.State == "Z" || s.State == "X") && s.Threads <= 1 }
