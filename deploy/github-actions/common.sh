# Sourced by job-started.sh and job-completed.sh: what both hooks agree on.
#
#   LINEAGE              the lineage binary (default: lineage, on PATH)
#   LINEAGE_SOCKET       the daemon's socket (default /run/lineage/lineage.sock)
#   LINEAGE_GHA_WORKER   the pid of the runner's worker (default: the hook's
#                        parent, which is the worker when the runner runs
#                        the hook itself)
#   LINEAGE_GHA_STRICT   1: a hook that can't do its part fails the job;
#                        otherwise it warns in the job's log and the job runs on
#
# The job's session is gha-RUN_ID-RUN_ATTEMPT-WORKER_PID: one per job on the
# host, even for the jobs of one matrix on runners sharing a host, and both
# hooks of one job, run by the same worker, name the same.

LINEAGE=${LINEAGE:-lineage}
worker=${LINEAGE_GHA_WORKER:-$PPID}
session=$(printf 'gha-%s-%s-%s' "${GITHUB_RUN_ID:-local}" "${GITHUB_RUN_ATTEMPT:-1}" "$worker" |
	tr -c 'A-Za-z0-9._-' '-' | cut -c1-64)

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
