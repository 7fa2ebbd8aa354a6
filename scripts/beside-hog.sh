#!/bin/sh
# Runs a command (make test-hog: make test) beside a CPU hog: one busy loop
# per CPU, at nice 0, as a user's CI machine runs beside everything else.
# The loops are this script's children, ended by the pids it holds when the
# command is done; each also ends on its own once this script is gone.
# LINEAGE_TEST_WAIT_SCALE (default 3) scales the tests' waits for conditions;
# LINEAGE_TEST_BESIDE_HOG=1 tells the tests a hog runs (test/e2e: a record
# may then lose events, each placed).
set -eu
[ $# -gt 0 ] || set -- make test
hogs=""
stop() {
	for pid in $hogs; do
		kill "$pid" 2>/dev/null || true
	done
	wait 2>/dev/null || true
}
trap stop EXIT
trap 'exit 130' INT TERM
n=$(nproc)
i=0
while [ "$i" -lt "$n" ]; do
	sh -c 'while kill -0 "$1" 2>/dev/null; do :; done' hog $$ &
	hogs="$hogs $!"
	i=$((i + 1))
done
echo "beside-hog: $n busy loops (pids$hogs) beside: $*" >&2
LINEAGE_TEST_BESIDE_HOG=1 LINEAGE_TEST_WAIT_SCALE=${LINEAGE_TEST_WAIT_SCALE:-3} "$@"
