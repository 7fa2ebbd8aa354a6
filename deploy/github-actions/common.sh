# Sourced by job-started.sh and job-completed.sh: what both hooks agree on.
#
#   LINEAGE              the lineage binary (default: lineage, on PATH)
#   LINEAGE_SOCKET       the daemon's socket (default /run/lineage/lineage.sock)
#   LINEAGE_GHA_WORKER   the pid of the runner's worker (default: the hook's
#                        parent, which is the worker when the runner runs
#                        the hook itself)
#   LINEAGE_GHA_STRICT   1: a hook that can't do its part fails the job;
#                        otherwise it warns in the job's log and the job runs on
#   LINEAGE_GHA_RANDOM   where the session id's random part is read from
#                        (default /dev/urandom)
#
# The job's session is gha-RUN_ID-RUN_ATTEMPT-WORKER_PID-RANDOM: one per job
# on the host, and not one another user of the host can guess and open
# first. A session belongs to the uid that opened it, so an id taken by
# another user would leave the job untracked: job-started.sh then fails the
# job, strict or not. job-completed.sh runs inside the job, as a member of
# its session, and asks the daemon which session that is.

LINEAGE=${LINEAGE:-lineage}
worker=${LINEAGE_GHA_WORKER:-$PPID}

# new_session prints a new session id for this job.
new_session() {
	random=$(od -An -N8 -tx1 "${LINEAGE_GHA_RANDOM:-/dev/urandom}" | tr -d ' \n')
	[ ${#random} -eq 16 ] || return 1
	prefix=$(printf 'gha-%s-%s-%s' "${GITHUB_RUN_ID:-local}" "${GITHUB_RUN_ATTEMPT:-1}" "$worker" |
		tr -c 'A-Za-z0-9._-' '-' | cut -c1-47)
	printf '%s-%s\n' "$prefix" "$random"
}

# own_session prints the session this hook's own process is tracked in.
own_session() {
	"$LINEAGE" why $$ --json 2>/dev/null | sed -n 's/^  "session": "\([A-Za-z0-9._-]*\)",$/\1/p' | head -n 1
}

# give_up says why lineage is not doing its part, as a workflow command the
# job's log shows; it fails the hook under LINEAGE_GHA_STRICT=1.
give_up() {
	if [ "${LINEAGE_GHA_STRICT:-0}" = 1 ]; then
		echo "::error::lineage: $*"
		exit 1
	fi
	echo "::warning::lineage: $*"
	exit 0
}

# fail_job fails the hook, and so the job, whatever LINEAGE_GHA_STRICT says.
fail_job() {
	echo "::error::lineage: $*"
	exit 1
}
