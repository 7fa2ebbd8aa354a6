#!/bin/sh
# make demo: run a leaky job under lineage and show what it caught.
set -eu
bin=${1:-bin/lineage}
here=$(dirname "$0")
report=$(mktemp /tmp/lineage-demo.XXXXXX.json)
trap 'rm -f "$report"' EXIT

echo "== lineage doctor (what this machine allows)"
"$bin" doctor || true
echo
echo "== lineage run --grace 1s --report $report -- $here/leaky-job.sh"
status=0
"$bin" run --grace 1s --report "$report" -- "$here/leaky-job.sh" || status=$?
echo
echo "== exit status: $status (the job's own)"
echo "== the JSON report has $(grep -c '"result"' "$report") outcomes; excerpt:"
grep -E '"(backend|decision|containment|result|signal)"' "$report" | head -20
