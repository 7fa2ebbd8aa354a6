#!/bin/sh
# ACTIONS_RUNNER_HOOK_JOB_COMPLETED, the other half of job-started.sh. It
# closes the job's session: whatever the job left running is ended
# (SIGTERM, the daemon's grace, SIGKILL, each process by identity) and
# listed in the job's log. The daemon spares the caller's chain: this hook,
# the processes it runs through, and the worker, which registered as the
# session's root and still has to report the job; the worker's own
# ancestors were never members. The runner's own cleanup of the job's
# processes runs after this hook. See common.sh for the environment.
set -u
. "$(dirname "$0")/common.sh"

session=$(own_session)
[ -n "$session" ] || give_up "this hook is tracked in no session: the job was not tracked, and nothing is closed"
if ! out=$("$LINEAGE" session close "$session" 2>&1); then
	give_up "could not close session $session: $out"
fi
printf 'lineage: %s\n' "$out"
