package tracker

import (
	"runtime/debug"
	"time"
)

// releaseLoadDelay is how long a job runs before its tracker gives back
// the memory its opening left (releaseLoadMemory).
const releaseLoadDelay = 10 * time.Millisecond

// releaseLoadMemory gives back to the kernel the heap that opening the
// tracker left as garbage (the BPF objects and the kernel's BTF read to
// load them: most of the heap by then), once the job has run for
// releaseLoadDelay. A process's exit unmaps all it has mapped, in time that
// grows with it (about 70 µs a MB on the project's machine), and lineage
// exits after the job it reaps: given back while the job runs, the memory
// costs that exit nothing. A job that ends sooner pays the exit in full
// rather than a collection beside its reap. Stop the returned timer once
// the job has ended.
func releaseLoadMemory() *time.Timer {
	return time.AfterFunc(releaseLoadDelay, debug.FreeOSMemory)
}
