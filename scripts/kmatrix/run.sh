#!/bin/bash
# The kernel matrix: boots Debian's own cloud kernels under QEMU (TCG, one
# vCPU) with an initramfs holding the static lineage and lineage-tracker and
# the static test binary of ./test/e2e, and runs lineage's per-kernel scenarios inside
# each (scripts/kmatrix/scenarios). Reports per kernel, per scenario, per
# test.
#
# Usage:
#   scripts/kmatrix/run.sh [options] [KERNEL...]     the matrix (make kmatrix)
#   scripts/kmatrix/run.sh --kernel K --shell-cmd 'CMD'
#                                     boot kernel K, run CMD (sh -c) inside,
#                                     stream the console; exit with CMD's status
#
# KERNEL is one of: 5.10 (bullseye), 6.1 (bookworm), 6.12 (trixie), bpo
# (trixie-backports, whatever it has). Default: all four, or $KERNELS
# (space-separated), e.g.  KERNELS=5.10 make kmatrix
#
# Options:
#   --tree DIR         the lineage tree to build and test (default: the git
#                      tree of the current directory if it is a lineage tree,
#                      else the one this script is in)
#   --kernel K         the kernel (same as a KERNEL argument)
#   --shell-cmd CMD    run CMD in the VM instead of the scenarios
#   --timeout S        for --shell-cmd: seconds before the VM is killed (300)
#   --scenarios FILE   another scenario list (default scripts/kmatrix/scenarios)
#   --offline          don't refresh the package lists; use cached kernels
#
# Inside the VM: /bin/lineage and /bin/lineage-tracker (static),
# /bin/lineage.test (static test binary of ./test/e2e: -test.run, -test.v),
# the host's sh, sleep, setsid, nohup,
# env, unshare, setpriv, true, cat, touch (with their libraries), and busybox
# for the rest (/bin/busybox APPLET). LINEAGE_REQUIRE_BPF=1 is set.
# Examples, for iterating on the BPF program from another worktree:
#   cd /work/wt/bpfvariants && /work/wt/kmatrix/scripts/kmatrix/run.sh \
#       --kernel 6.1 --shell-cmd '/bin/lineage doctor'
#   .../run.sh --kernel 5.10 --shell-cmd \
#       '/bin/lineage.test -test.v -test.run "^TestRunHardCancel$/^bpf$"'
#   KMATRIX_ALLOW_FAIL=1 .../run.sh 6.1 6.12
#
# Environment:
#   KERNELS              the kernels to run (default "5.10 6.1 6.12 bpo")
#   KMATRIX_ALLOW_FAIL=1 report test failures but exit 0 (kernels that could
#                        not be fetched or booted still count: see below)
#   KMATRIX_XFAIL        expected failures, space-separated KERNEL:SCENARIO
#                        globs (e.g. "5.10:* 6.1:* 6.12:hard-cancel"): reported
#                        as XFAIL, not failing the matrix
#   KMATRIX_CACHE        downloads and kernels (default <this repo>/.cache/kmatrix)
#   KMATRIX_OUT          logs and summary (default $KMATRIX_CACHE/runs/<time>)
#   KMATRIX_MEM          VM memory (default 1G)
#
# The outcome: a kernel whose package can't be fetched is skipped. The matrix
# fails when fewer than three kernels ran (fewer than asked for, when fewer
# than three were asked for), or when any scenario failed on a kernel that
# ran, unless KMATRIX_ALLOW_FAIL=1 or KMATRIX_XFAIL says so.
#
# Packages come from the mirror this machine's own apt sources name, through
# a private sources list and apt state under the cache: the machine's apt
# configuration is never changed. qemu-system-x86 and busybox-static are
# installed from the machine's sources when missing (needs root).
set -eu
set -o pipefail

started=$(date +%s)
here=$(cd "$(dirname "$0")" && pwd)
self_repo=$(cd "$here/../.." && pwd)
all_kernels="5.10 6.1 6.12 bpo"

die() {
	echo "kmatrix: $*" >&2
	exit 2
}
log() { echo "kmatrix: $*" >&2; }

tree=""
shell_cmd=""
shell_timeout=300
scenarios="$here/scenarios"
offline=0
kernels=()
while [ $# -gt 0 ]; do
	case "$1" in
	--tree) tree=$2; shift 2 ;;
	--kernel) kernels+=("$2"); shift 2 ;;
	--shell-cmd) shell_cmd=$2; shift 2 ;;
	--timeout) shell_timeout=$2; shift 2 ;;
	--scenarios) scenarios=$2; shift 2 ;;
	--offline) offline=1; shift ;;
	-h | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) die "unknown option $1 (see --help)" ;;
	*) kernels+=("$1"); shift ;;
	esac
done
if [ ${#kernels[@]} -eq 0 ]; then
	read -r -a kernels <<<"${KERNELS:-$all_kernels}"
fi
for k in "${kernels[@]}"; do
	case " $all_kernels " in *" $k "*) ;; *) die "unknown kernel $k (want one of: $all_kernels)" ;; esac
done
if [ -n "$shell_cmd" ] && [ ${#kernels[@]} -ne 1 ]; then
	die "--shell-cmd needs exactly one kernel (--kernel K)"
fi

if [ -z "$tree" ]; then
	top=$(git rev-parse --show-toplevel 2>/dev/null || true)
	if [ -n "$top" ] && [ -f "$top/cmd/lineage/main.go" ]; then
		tree=$top
	else
		tree=$self_repo
	fi
fi
tree=$(cd "$tree" && pwd)
[ -f "$tree/cmd/lineage/main.go" ] || die "$tree is not a lineage tree"

cache=${KMATRIX_CACHE:-$self_repo/.cache/kmatrix}
mkdir -p "$cache"
cache=$(cd "$cache" && pwd)
out=${KMATRIX_OUT:-$cache/runs/$(date +%Y%m%d-%H%M%S)-$$}
mkdir -p "$out"
out=$(cd "$out" && pwd)

# ---- tools --------------------------------------------------------------

static_busybox() {
	[ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1
}
# What this script runs, and the Debian package that has it: a fresh Debian
# machine with Go, gcc and git has all but QEMU and a static busybox.
need=()
for tp in qemu-system-x86_64:qemu-system-x86 timeout:coreutils flock:util-linux gzip:gzip \
	dpkg-deb:dpkg apt-get:apt apt-cache:apt ldd:libc-bin find:findutils awk:mawk; do
	command -v "${tp%%:*}" >/dev/null 2>&1 || need+=("${tp#*:}")
done
static_busybox || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "missing ${need[*]}: install them (apt-get install ${need[*]}) or run as root"
	log "installing ${need[*]} from this machine's apt sources"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
static_busybox || die "/bin/busybox is not static"
command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"

# ---- kernels ------------------------------------------------------------

# The mirrors this machine uses: the first Debian archive URI and the first
# security URI in its apt sources (one-line and deb822 formats).
apt_uris() {
	local f
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		case "$f" in
		*.sources)
			awk '
				function flush() { if (types ~ /(^| )deb( |$)/ && enabled != "no") { n = split(uris, u, " "); m = split(suites, s, " "); for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) print u[i], s[j] } types = uris = suites = enabled = "" }
				/^[ \t]*#/ { next }
				/^[ \t]*$/ { flush(); next }
				/^Types:/ { sub(/^Types:[ \t]*/, ""); types = $0 }
				/^URIs:/ { sub(/^URIs:[ \t]*/, ""); uris = $0 }
				/^Suites:/ { sub(/^Suites:[ \t]*/, ""); suites = $0 }
				/^Enabled:/ { sub(/^Enabled:[ \t]*/, ""); enabled = tolower($0) }
				END { flush() }' "$f"
			;;
		*)
			sed -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" { print $2, $3 }'
			;;
		esac
	done
}
mirror_main=""
mirror_security=""
while read -r uri suite; do
	case "$suite" in
	*-security) [ -n "$mirror_security" ] || mirror_security=$uri ;;
	bullseye* | bookworm* | trixie* | forky* | sid | stable* | oldstable* | testing* | unstable*)
		[ -n "$mirror_main" ] || mirror_main=$uri ;;
	esac
done < <(apt_uris)
[ -n "$mirror_main" ] || die "no Debian mirror found in /etc/apt/sources.list(.d)"

# suites_of KERNEL: "URI SUITE" lines for its private sources list.
suites_of() {
	local main sec
	case "$1" in
	5.10) main=bullseye sec=bullseye-security ;;
	6.1) main=bookworm sec=bookworm-security ;;
	6.12) main=trixie sec=trixie-security ;;
	bpo) main=trixie-backports sec="" ;;
	esac
	echo "$mirror_main $main"
	if [ -n "$sec" ] && [ -n "$mirror_security" ]; then
		echo "$mirror_security $sec"
	fi
}

keyring=""
[ -f /usr/share/keyrings/debian-archive-keyring.gpg ] && keyring="[signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] "

# find_vmlinuz DIR: the kernel image in an extracted package: in /boot, or
# (newer packages) in /usr/lib/modules/ABI.
find_vmlinuz() {
	ls "$1"/boot/vmlinuz-* "$1"/usr/lib/modules/*/vmlinuz 2>/dev/null | head -n1
}

# fetch_kernel KERNEL: prints "PACKAGE VERSION VMLINUZ" of the newest cloud
# kernel of KERNEL's suites, downloaded and extracted into the cache, or
# nothing when it can't be fetched (and no earlier download is cached).
fetch_kernel() {
	local k=$1 dir="$cache/apt/$1" uri suite
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial" "$cache/debs" "$cache/kernels"
	: >"$dir/sources.list"
	while read -r uri suite; do
		echo "deb ${keyring}$uri $suite main" >>"$dir/sources.list"
	done < <(suites_of "$k")
	local apt=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$dir/lists"
		-o "Dir::Cache=$dir/cache" -o Dir::State::status=/dev/null -o APT::Sandbox::User=root -o Debug::NoLocking=1 -q)
	local current="$cache/current-$k"
	if [ "$offline" = 0 ] && ! apt-get "${apt[@]}" update >"$dir/update.log" 2>&1; then
		log "$k: package lists of $(suites_of "$k" | awk '{print $2}' | tr '\n' ' ')unreachable (see $dir/update.log)"
	fi
	local pkg ver
	pkg=$(apt-cache "${apt[@]}" depends linux-image-cloud-amd64 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }' || true)
	if [ -n "$pkg" ]; then
		ver=$(apt-cache "${apt[@]}" show --no-all-versions "$pkg" 2>/dev/null | awk '$1 == "Version:" { print $2; exit }' || true)
	fi
	if [ -n "$pkg" ] && [ -n "${ver:-}" ]; then
		local kdir="$cache/kernels/${pkg}_$ver"
		if [ ! -f "$kdir/.done" ] || [ -z "$(find_vmlinuz "$kdir")" ]; then
			rm -rf "$kdir"
			# Newer kernels ship vmlinuz in linux-binary-ABI, a dependency
			# of linux-image-ABI of the same version.
			local p d deb ok=1
			for p in "$pkg" $(apt-cache "${apt[@]}" show --no-all-versions "$pkg" 2>/dev/null |
				awk '$1 == "Depends:"' | tr ',' '\n' | grep -o 'linux-binary-[^ ]*' || true); do
				deb=""
				(cd "$cache/debs" && apt-get "${apt[@]}" download "$p=$ver" >>"$dir/download.log" 2>&1) || true
				for d in "$cache/debs/${p}"_*.deb; do
					[ -f "$d" ] && [ "$(dpkg-deb -f "$d" Version)" = "$ver" ] && deb=$d
				done
				if [ -z "$deb" ]; then
					ok=0
					break
				fi
				dpkg-deb -x "$deb" "$kdir"
			done
			if [ $ok = 1 ]; then
				touch "$kdir/.done"
			fi
		fi
		if [ -f "$kdir/.done" ]; then
			local vmlinuz
			vmlinuz=$(find_vmlinuz "$kdir")
			if [ -n "$vmlinuz" ]; then
				echo "$pkg $ver $vmlinuz" >"$current"
			fi
		fi
	fi
	if [ -f "$current" ]; then
		cat "$current"
	fi
}

# ---- the initramfs --------------------------------------------------------

work=$(mktemp -d "${TMPDIR:-/tmp}/kmatrix.XXXXXX")
trap 'rm -rf "$work"' EXIT

log "tree $tree ($(git -C "$tree" describe --always --dirty 2>/dev/null || echo 'not git'))"
log "building static binaries"
t0=$(date +%s)
(cd "$tree" && CGO_ENABLED=0 go build -o "$work/lineage" ./cmd/lineage)
(cd "$tree" && CGO_ENABLED=0 go build -o "$work/lineage-tracker" ./cmd/lineage-tracker)
(cd "$tree" && CGO_ENABLED=0 go test -c -o "$work/lineage.test" ./test/e2e)

root=$work/root
mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,etc,kmatrix,lib64,lib/x86_64-linux-gnu}
cp /bin/busybox "$root/bin/busybox"
for a in $(/bin/busybox --list); do
	[ "$a" = busybox ] || ln -sf busybox "$root/bin/$a"
done
# The host's tools where the tests depend on their options (setsid -f,
# unshare --fork, nohup, setpriv are missing or different in busybox).
for t in sh sleep setsid nohup env unshare setpriv true false cat touch; do
	p=$(type -P "$t") || die "$t is missing on this machine"
	p=$(readlink -f "$p")
	rm -f "$root/bin/$t"
	cp "$p" "$root/bin/$t"
	ldd "$p" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | while read -r lib; do
		mkdir -p "$root$(dirname "$lib")"
		cp -L "$lib" "$root$lib"
	done
done
cp "$work/lineage" "$work/lineage-tracker" "$work/lineage.test" "$root/bin/"
cp "$here/init" "$root/init"
chmod 755 "$root/init"
echo "root:x:0:0:root:/tmp:/bin/sh" >"$root/etc/passwd"
echo "root:x:0:" >"$root/etc/group"

plan=$root/kmatrix/plan
if [ -n "$shell_cmd" ]; then
	printf 'shell\t%s\t%s\n' "$shell_timeout" "$shell_cmd" >"$plan"
else
	grep -v '^#' "$scenarios" | grep -v '^[[:space:]]*$' >"$plan"
fi
(cd "$root" && find . | /bin/busybox cpio -o -H newc 2>/dev/null) | gzip -1 >"$work/initrd.gz"
log "built in $(($(date +%s) - t0))s: initramfs $(du -h "$work/initrd.gz" | cut -f1)"

# The VM's time limit: every scenario's own, plus boot.
vm_timeout=60
while IFS=$'\t' read -r _ t _; do
	vm_timeout=$((vm_timeout + t))
done <"$plan"

# clean: the console without carriage returns and terminal escapes, each
# marker at the start of its line.
clean() {
	sed -u -e 's/\r//g' -e 's/\x1b\[[0-9;?]*[A-Za-z]//g' -e 's/^.*\(KMATRIX-[A-Z]*\)/\1/'
}

# boot VMLINUZ LOG: one VM; its console goes to LOG (and to the terminal for
# --shell-cmd). timeout(1) in --foreground mode signals only QEMU, its own
# child, by pid.
boot() {
	local args=(-accel tcg -cpu max -smp 1 -m "${KMATRIX_MEM:-1G}" -nographic -no-reboot -nic none
		-kernel "$1" -initrd "$work/initrd.gz"
		-append "console=ttyS0 panic=-1 oops=panic loglevel=4 random.trust_cpu=on rdinit=/init")
	if [ -n "$shell_cmd" ]; then
		timeout --foreground -k 10 "$vm_timeout" qemu-system-x86_64 "${args[@]}" </dev/null 2>&1 | clean | tee "$2"
	else
		timeout --foreground -k 10 "$vm_timeout" qemu-system-x86_64 "${args[@]}" </dev/null 2>&1 | clean >"$2"
	fi
}

# ---- run ------------------------------------------------------------------

exec 9>"$cache/.lock"
summary=$out/summary.txt
: >"$summary"
ran=0
failed=0
xfailed=0
declare -A result
declare -A kinfo

for k in "${kernels[@]}"; do
	# Two runs sharing the cache don't fetch at once.
	flock 9
	info=$(fetch_kernel "$k")
	flock -u 9
	if [ -z "$info" ]; then
		log "$k: SKIPPED: no kernel package could be fetched"
		kinfo[$k]="skipped (package not fetched)"
		continue
	fi
	read -r pkg ver vmlinuz <<<"$info"
	log "$k: $pkg $ver: booting"
	vmlog=$out/$k.log
	t0=$(date +%s)
	rc=0
	boot "$vmlinuz" "$vmlog" || rc=$?
	took=$(($(date +%s) - t0))
	uname=$(awk '$1 == "KMATRIX-KERNEL" { print $2; exit }' "$vmlog")
	booted=$(awk '$1 == "KMATRIX-BOOTED" { sub(/uptime=/, "", $2); print $2; exit }' "$vmlog")
	kinfo[$k]="$pkg $ver (uname ${uname:-?}), boot ${booted:-?}, VM ${took}s"
	echo "== $k: $pkg $ver, uname ${uname:-none}, booted at ${booted:-never}, VM ${took}s (qemu exit $rc)" | tee -a "$summary"
	if [ -n "$shell_cmd" ]; then
		end=$(awk '$1 == "KMATRIX-END" { print $4; exit }' "$vmlog")
		echo "kmatrix: log $vmlog" >&2
		[ -n "$end" ] || die "the VM ended before the command did (qemu exit $rc)"
		exit "${end#rc=}"
	fi
	ran=$((ran + 1))
	# Per scenario: its END marker, checked against what the tests said.
	while IFS=$'\t' read -r name _ cmd; do
		verdict=$(awk -v name="$name" '
			$1 == "KMATRIX-BEGIN" && $2 == name { in_ = 1; began = 1; next }
			in_ && /testing: warning: no tests to run/ { notests = 1 }
			in_ && /^ *--- SKIP: / { skips++ }
			in_ && /^ *--- (PASS|FAIL): / { tests++ }
			in_ && $1 == "KMATRIX-END" && $2 == name { res = $3; secs = $5; sub(/secs=/, "", secs); in_ = 0 }
			END {
				if (!began) { print "NOTRUN -"; exit }
				if (res == "") { print "CRASH -"; exit }
				if (res == "PASS" && notests) res = "MISSING"
				else if (res == "PASS" && skips) res = "SKIPPED"
				else if (res == "PASS" && cmd ~ /lineage\.test/ && !tests) res = "MISSING"
				print res, secs "s"
			}' cmd="$cmd" "$vmlog")
		read -r res secs <<<"$verdict"
		mark=""
		if [ "$res" != PASS ]; then
			xf=0
			for pat in ${KMATRIX_XFAIL:-}; do
				# shellcheck disable=SC2254
				case "$k:$name" in $pat) xf=1 ;; esac
			done
			if [ $xf = 1 ]; then
				mark=" (expected)"
				xfailed=$((xfailed + 1))
			else
				failed=$((failed + 1))
			fi
		fi
		result[$k/$name]="$res$mark"
		printf '  %-18s %-8s %8s%s\n' "$name" "$res" "$secs" "$mark" | tee -a "$summary"
		# The tests' own verdicts, one line each, and for a failure its
		# first few messages (the whole output is in the log).
		awk -v name="$name" -v failed="$([ "$res" = PASS ] || echo 1)" '
			$1 == "KMATRIX-BEGIN" && $2 == name { in_ = 1; next }
			in_ && $1 == "KMATRIX-END" { in_ = 0 }
			in_ && /^ *--- (PASS|FAIL|SKIP): / { sub(/^ +/, ""); print "      " $0 }
			in_ && /^ +[a-z_0-9]+\.go:[0-9]+: storm: / { sub(/^ +[a-z_0-9]+\.go:[0-9]+: /, ""); print "        " $0 }
			in_ && failed && /^ +[a-z_0-9]+\.go:[0-9]+: / && shown < 4 { sub(/^ +/, ""); print "        " substr($0, 1, 240); shown++ }' "$vmlog" | tee -a "$summary"
	done <"$plan"
done

[ -z "$shell_cmd" ] || die "kernel ${kernels[0]} is not available"

# The matrix: kernels by scenarios.
{
	echo
	printf '%-6s' kernel
	while IFS=$'\t' read -r name _ _; do printf ' %-18s' "$name"; done <"$plan"
	echo
	for k in "${kernels[@]}"; do
		printf '%-6s' "$k"
		while IFS=$'\t' read -r name _ _; do printf ' %-18s' "${result[$k/$name]:-skipped}"; done <"$plan"
		echo
	done
	echo
	for k in "${kernels[@]}"; do echo "$k: ${kinfo[$k]}"; done
	echo "total: $(($(date +%s) - started))s (build, downloads and every VM)"
} | tee -a "$summary"

want=3
[ ${#kernels[@]} -lt 3 ] && want=${#kernels[@]}
status=0
if [ "$ran" -lt "$want" ]; then
	echo "kmatrix: FAIL: $ran kernels ran, want at least $want" | tee -a "$summary"
	status=1
fi
if [ "$failed" -gt 0 ]; then
	if [ "${KMATRIX_ALLOW_FAIL:-0}" = 1 ]; then
		echo "kmatrix: $failed scenario failures, allowed (KMATRIX_ALLOW_FAIL=1)" | tee -a "$summary"
	else
		echo "kmatrix: FAIL: $failed scenario failures" | tee -a "$summary"
		status=1
	fi
fi
[ "$xfailed" -gt 0 ] && echo "kmatrix: $xfailed expected failures (KMATRIX_XFAIL)" | tee -a "$summary"
[ "$status" = 0 ] && echo "kmatrix: PASS: $ran kernels ran" | tee -a "$summary"
echo "kmatrix: logs in $out" >&2
exit "$status"
