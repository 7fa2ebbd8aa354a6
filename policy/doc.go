// Package policy is where lineage decides, and nothing else: whether an
// event reaps a lineage, only reports it, or does nothing; which processes
// are spared on purpose; and which may never be signalled at all.
//
// Everything here is a pure function of its arguments. The package makes no
// system calls, reads no /proc and no environment (the caller passes
// [os.Getenv] to [KillSwitchFromEnv]), and sends no signals; it imports only
// lineage's domain types and the standard library. Its decisions are
// therefore table-tested, and the same inputs always give the same answer.
// Nothing is shared between calls, so every function is safe for
// concurrent use by multiple goroutines.
//
// The parts, in the order a caller uses them:
//
//   - [Decide] maps a runtime [Kind], an [Event], the resolved kill switch
//     ([Reaping]) and whether the root is kept on purpose to an [Action]
//     (reap, report or skip) with a reason.
//   - [KillSwitchFromEnv] reads LINEAGE_REAPING=on|off, and [ResolveReaping]
//     lets it win over flags and configuration.
//   - [Keep] rules spare processes by identity, by root or by executable
//     path. A rule is a predicate over a member: it can only take a process
//     out of the set to be reaped, never put one in.
//   - [Protect] is the first line of defence: pid 0 and 1, lineage itself,
//     its ancestors and its process group, kernel threads, non-members and
//     identities whose start time does not match are never victims. The
//     reaper checks identities again at the signal, so no single bug can
//     kill the wrong process.
package policy
