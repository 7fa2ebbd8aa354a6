// Package guardian ends a `lineage run` job's lineage when lineage itself is
// killed (a CI runner's hard cancel SIGKILLs lineage and its whole process
// group) on kernels whose BPF exit hook can't, and always with the proc
// backend.
//
// The guardian is a small process that lineage starts with [Start] right
// after the job: in a session and process group of its own, with an empty
// environment, stdin and stdout on /dev/null and / as its working
// directory, so that a runner's process-group kill or environment scan
// doesn't take it. It holds what reaping needs: for the bpf backend, the
// membership maps and the program links (so the fork hook stays attached
// and no member forks out of reach); for the proc backend, the member
// identities lineage streams to it with [Guardian.Member].
//
// lineage talks to it over a pipe whose write end only lineage holds
// (close-on-exec: the job never inherits it). When lineage says done
// ([Guardian.Done]), the guardian exits at once and touches nothing. When the
// pipe ends without done, lineage is dead: the guardian contains the lineage
// (ROOT_F_REAPING in the kernel, or SIGSTOP through internal/reap), reaps it
// through internal/reap by identity, honouring the keep rules, lineage's
// protected set and the kill switch, and exits. Anything on the pipe it can't
// read disarms it: it says why on stderr and exits without signalling.
//
// A guardian killed together with lineage (a cgroup kill) leaves nothing to
// do: the job's processes are in that cgroup too and die in the same kill.
//
// Privileges: the guardian needs what the reap needs (the right to signal
// the members), and, for the bpf backend, nothing more than the descriptors
// it is handed.
package guardian
