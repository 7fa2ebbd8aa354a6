#!/bin/sh
# ACTIONS_RUNNER_HOOK_JOB_STARTED for a self-hosted GitHub Actions runner
# on a host where `lineage serve` runs. It registers the runner's worker,
# the hook's parent and the parent of every step the job runs, as the root
# of a session of its own, so that whatever the job starts is tracked from
# then on, however it detaches (setsid, double forks, nohup, a scrubbed
# environment). job-completed.sh closes that session. See common.sh for the
# environment both read.
set -u
. "$(dirname "$0")/common.sh"

session=$(new_session) || give_up "could not read a random session id: this job is not tracked"
label="${GITHUB_REPOSITORY:-} ${GITHUB_WORKFLOW:-} ${GITHUB_JOB:-}"
# --self-close: the completed hook runs inside the job, as a member of the
# session it closes; that close spares it, its chain and the worker.
if ! out=$("$LINEAGE" session open "$session" --kind autonomous --self-close --label "$label" 2>&1); then
	case $out in
	*"(409 conflict)"*)
		fail_job "session $session is taken by another user of this host: this job would run untracked ($out)" ;;
	esac
	give_up "could not open session $session: this job is not tracked ($out)"
fi
"$LINEAGE" roots add "$worker" --session "$session" --label "runner worker" >/dev/null ||
	give_up "could not register the worker $worker in session $session: this job is not tracked"
echo "lineage: this job is tracked as session $session (root: the worker, pid $worker)"
