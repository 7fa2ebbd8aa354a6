#!/bin/sh
# make bench: the project's benchmarks, side by side, as docs/benchmarks.md's tables.
# Needs root (the BPF tracker) and gcc (the spawner). Takes a few minutes.
set -eu
bin=${1:-bin/lineage}
out=bench-results
mkdir -p "$out"

echo "== spawner rates, lineage run wall time, reap latency, the sidecar (cmd/lineage-bench)"
go build -o "$out/lineage-bench" ./cmd/lineage-bench
# The benchmark (and the event reader it runs) stays on CPU 0; it pins the
# spawner to the last CPU, so that the two don't share one. The reap figure
# runs its reapers and jobs on every CPU, as a user's reap does.
pin=""
if command -v taskset >/dev/null 2>&1 && [ "$(nproc)" -ge 2 ]; then
	pin="taskset -c 0"
fi
# The sidecar's baseline is Go's lineage exec: this tree's front built
# without cgo (no fast path), beside the same tracker, timed in the same
# rounds as the fast path.
gopath="$out/front-without-fast-path"
mkdir -p "$gopath"
make -s build FRONT_CGO=0 BIN="$gopath/lineage" TRACKER="$gopath/lineage-tracker"
$pin "$out/lineage-bench" -lineage "$bin" -serve-baseline "$gopath/lineage" | tee "$out/lineage-bench.md"

echo
echo "== what lineage run --record costs the spawner (cmd/lineage-bench -record)"
$pin "$out/lineage-bench" -lineage "$bin" -record | tee "$out/lineage-bench-record.md"

echo
echo "== lineage run through a daemon, beside standalone (cmd/lineage-bench -only daemon)"
$pin "$out/lineage-bench" -lineage "$bin" -only daemon | tee "$out/lineage-bench-daemon.md"

echo
echo "== the clients: Client.run over subprocess.run, the pytest plugin's cost a test (cmd/lineage-bench -only clients)"
$pin "$out/lineage-bench" -lineage "$bin" -only clients | tee "$out/lineage-bench-clients.md"

echo
echo "== a daemon many users share: sessions open, another uid's streams held (cmd/lineage-bench -only shared)"
$pin "$out/lineage-bench" -lineage "$bin" -only shared | tee "$out/lineage-bench-shared.md"

echo
echo "== Go benchmarks: /proc scan cost, reap latency (go test -bench)"
go test -run '^$' -bench . -benchtime 3x -timeout 30m ./lineage ./internal/proc ./internal/loader ./internal/reap ./internal/record ./internal/report | tee "$out/go-bench.txt"
