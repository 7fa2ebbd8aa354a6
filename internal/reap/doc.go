// Package reap ends a lineage: it waits for members to exit on their own,
// keeps the lineage from growing, terminates, kills, checks that nothing is
// left and says what happened to every member.
//
// Every signal goes through a pidfd. The reaper pins a member with
// pidfd_open(2), then reads /proc/PID/stat and checks that the pid still
// shows the member's start time (field 22), then signals the pin with
// pidfd_send_signal(2). The order matters: a pidfd names the process it was
// opened on, whatever later gets its pid number, so a check made after the
// open is still true at the signal (a check made before the open would not
// be). A member that is gone, or whose pid named another process when it was
// pinned, is recorded and sent nothing.
// Exits are awaited by polling pidfds (through epoll), never by sleeping.
//
// Some processes are never signalled, whatever the [Source] says: pid 0 and 1,
// the reaper's own process, any process in its process group, its ancestors
// (the CI runner or agent host that started it), kernel threads, anything the
// Source did not list, and any identity whose start time doesn't match. The
// check is made again at every signal, so that no single bug upstream can
// kill the wrong process; refusals appear in the [Report] with a reason.
//
// A consequence for callers: a lineage must not share the reaper's process
// group. `lineage run` starts its command in a process group of its own.
//
// Privileges: the reaper needs the right to signal the members (the same
// user, or CAP_KILL) and to read their /proc/PID/stat and cmdline. A process
// it can pin but not see in /proc (a hidepid mount, another PID namespace) is
// refused, never signalled blindly. pidfds need Linux 5.3; exit statuses in
// the report need Linux 6.15 (PIDFD_INFO_EXIT) and are left out before that.
package reap
