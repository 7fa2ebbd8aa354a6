#!/bin/sh
# record-storm.sh: issue 23's fork storm under `lineage run --record`, RUNS
# times, one line per run: the events the record lost, its lines, and how
# many processes ran.
#
#   scripts/record-storm.sh [-n RUNS] [-b LINEAGE] [-s SLEEP] [-- LINEAGE RUN FLAGS...]
#
# The storm is a shell tree of width 6 and depth 4 (1,555 processes), each
# process an exec of sh with about 300 bytes of argv; each forks its
# children, then execs sleep SLEEP (default 90 s, an upper bound: the reap
# ends them). The job returns once all have started (at least 0.7 s), and
# lineage reaps the rest with containment. Flags after -- go to `lineage run`
# (-- --ring-bytes 64K). Beside a CPU hog:
#   scripts/beside-hog.sh scripts/record-storm.sh -n 10
# Needs root (the BPF tracker). Each run's record is left in a temporary
# directory, removed at the end unless KEEP=1.
set -eu
runs=10
bin=bin/lineage
sleep_for=90
while getopts n:b:s: opt; do
	case $opt in
	n) runs=$OPTARG ;;
	b) bin=$OPTARG ;;
	s) sleep_for=$OPTARG ;;
	*) exit 2 ;;
	esac
done
shift $((OPTIND - 1))
dir=$(mktemp -d /tmp/record-storm.XXXXXX)
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$dir"' EXIT
cat >"$dir/storm.sh" <<'EOF'
#!/bin/sh
# storm.sh LOG SLEEP: every process logs its pid, forks 6 children one
# level down (4 levels), then execs sleep SLEEP.
storm='echo $$ >> "$2"; d=$1; if [ "$d" -gt 0 ]; then i=0; while [ $i -lt 6 ]; do sh -c "$0" "$0" $((d - 1)) "$2" "$3" & i=$((i + 1)); done; fi; exec sleep "$3"'
sh -c "$storm" "$storm" 4 "$1" "$2" &
sleep 0.7
n=0
while [ $n -lt 300 ] && [ "$(wc -l <"$1")" -lt 1555 ]; do
	sleep 0.1
	n=$((n + 1))
done
EOF
chmod +x "$dir/storm.sh"
echo "run lost lines processes"
total=0
i=1
while [ $i -le "$runs" ]; do
	: >"$dir/pids.$i"
	"$bin" run -q --record "$dir/record.$i.jsonl" "$@" -- "$dir/storm.sh" "$dir/pids.$i" "$sleep_for" >/dev/null 2>&1 || true
	lost=$(sed -n 's/.*"kind":"loss".*"reason":"events lost","count":\([0-9]*\).*/\1/p' "$dir/record.$i.jsonl" | awk '{s += $1} END {print s + 0}')
	echo "$i $lost $(wc -l <"$dir/record.$i.jsonl") $(wc -l <"$dir/pids.$i")"
	total=$((total + lost))
	i=$((i + 1))
done
echo "total lost $total over $runs runs"
[ "${KEEP:-0}" = 1 ] && echo "records in $dir" >&2
exit 0
