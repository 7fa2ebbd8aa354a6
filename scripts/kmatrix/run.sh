#!/bin/bash
# The kernel matrix: boots Debian's own cloud kernels under QEMU (TCG, one
# vCPU) with an initramfs holding the static lineage and lineage-tracker and
# the static test binary of ./test/e2e, and runs lineage's per-kernel scenarios inside
# each (scripts/kmatrix/scenarios). Reports per kernel, per scenario, per
# test. amd64 kernels boot under qemu-system-x86_64, arm64 ones under
# qemu-system-aarch64 (-M virt -cpu max,pauth-impdef=on), each with binaries and tools of
# its own architecture.
#
# Usage:
#   scripts/kmatrix/run.sh [options] [KERNEL...]     the matrix (make kmatrix)
#   scripts/kmatrix/run.sh --kernel K --shell-cmd 'CMD'
#                                     boot kernel K, run CMD (sh -c) inside,
#                                     stream the console; exit with CMD's status
#
# KERNEL is one of: 5.10 (bullseye), 6.1 (bookworm), 6.12 (trixie), bpo
# (trixie-backports, whatever it has). Default: all four for amd64, 6.1,
# 6.12 and bpo for arm64, or $KERNELS (space-separated, for every
# architecture asked), e.g.  KERNELS=5.10 make kmatrix
#
# Options:
#   --tree DIR         the lineage tree to build and test (default: the git
#                      tree of the current directory if it is a lineage tree,
#                      else the one this script is in)
#   --kernel K         the kernel (same as a KERNEL argument)
#   --arch A           amd64, arm64, or all (both, amd64 first);
#                      default $ARCH, else amd64
#   --shell-cmd CMD    run CMD in the VM instead of the scenarios
#   --timeout S        for --shell-cmd: seconds before the VM is killed (300)
#   --scenarios FILE   another scenario list (default scripts/kmatrix/scenarios)
#   --offline          don't refresh the package lists; use cached kernels
#
# Inside the VM: /bin/lineage and /bin/lineage-tracker (make static, for the
# VM's architecture: the front with its C fast path), /bin/lineage.test
# (static test binary of ./test/e2e: -test.run, -test.v), sh, sleep,
# setsid, nohup, env, unshare, setpriv, true, false, cat, touch (with their
# libraries), and busybox for the rest (/bin/busybox APPLET). For amd64
# these are the host's own tools and busybox; for arm64, Debian bookworm's
# arm64 dash, coreutils, util-linux and busybox-static, fetched as the
# kernels are and extracted. LINEAGE_REQUIRE_BPF=1 is set.
# Examples, for iterating on the BPF program from another worktree:
#   cd /work/wt/bpfvariants && /work/wt/kmatrix/scripts/kmatrix/run.sh \
#       --kernel 6.1 --shell-cmd '/bin/lineage doctor'
#   .../run.sh --kernel 5.10 --shell-cmd \
#       '/bin/lineage.test -test.v -test.run "^TestRunHardCancel$/^bpf$"'
#   KMATRIX_ALLOW_FAIL=1 .../run.sh 6.1 6.12
#   ARCH=arm64 KERNELS=6.12 make kmatrix
#
# Environment:
#   KERNELS              the kernels to run (default "5.10 6.1 6.12 bpo";
#                        for arm64 "6.1 6.12 bpo")
#   ARCH                 amd64, arm64 or all (make kmatrix ARCH=arm64)
#   KMATRIX_ALLOW_FAIL=1 report test failures but exit 0 (kernels that could
#                        not be fetched or booted still count: see below)
#   KMATRIX_XFAIL        expected failures, space-separated KERNEL:SCENARIO
#                        globs (e.g. "5.10:* 6.1:* 6.12:hard-cancel"; an arm64
#                        kernel is arm64-KERNEL: "arm64-6.1:storm"): reported
#                        as XFAIL, not failing the matrix
#   KMATRIX_CACHE        downloads and kernels (default <this repo>/.cache/kmatrix)
#   KMATRIX_OUT          logs and summary (default $KMATRIX_CACHE/runs/<time>)
#   KMATRIX_MEM          VM memory (default 1G)
#
# The outcome: a kernel whose package can't be fetched is skipped. The matrix
# fails when, for an architecture, fewer than three kernels ran (fewer than
# asked for, when fewer than three were asked for), or when any scenario
# failed on a kernel that ran, unless KMATRIX_ALLOW_FAIL=1 or KMATRIX_XFAIL
# says so.
#
# Packages come from the mirror this machine's own apt sources name, through
# a private sources list and apt state under the cache: the machine's apt
# configuration is never changed. qemu-system-x86 (qemu-system-arm for
# arm64), busybox-static, and for the arm64 front's C fast path
# gcc-aarch64-linux-gnu and libc6-dev-arm64-cross are installed from the
# machine's sources when missing (needs root).
set -eu
set -o pipefail

started=$(date +%s)
here=$(cd "$(dirname "$0")" && pwd)
self_repo=$(cd "$here/../.." && pwd)
all_kernels="5.10 6.1 6.12 bpo"
# arm64: bullseye's 5.10 boots when named (KERNELS=5.10 ARCH=arm64), but is
# left out of the default under slow emulation.
arm64_kernels="6.1 6.12 bpo"

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
arch_opt=${ARCH:-amd64}
while [ $# -gt 0 ]; do
	case "$1" in
	--tree) tree=$2; shift 2 ;;
	--kernel) kernels+=("$2"); shift 2 ;;
	--arch) arch_opt=$2; shift 2 ;;
	--shell-cmd) shell_cmd=$2; shift 2 ;;
	--timeout) shell_timeout=$2; shift 2 ;;
	--scenarios) scenarios=$2; shift 2 ;;
	--offline) offline=1; shift ;;
	-h | --help) sed -n '2,/^set -eu/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//'; exit 0 ;;
	-*) die "unknown option $1 (see --help)" ;;
	*) kernels+=("$1"); shift ;;
	esac
done
case "$arch_opt" in
amd64 | x86_64 | x86) arches=(amd64) ;;
arm64 | aarch64) arches=(arm64) ;;
all) arches=(amd64 arm64) ;;
*) die "unknown architecture $arch_opt (want amd64, arm64 or all)" ;;
esac
# The kernels of each architecture: the named ones, else its default.
declare -A arch_kernels
for a in "${arches[@]}"; do
	default=$all_kernels
	[ "$a" = arm64 ] && default=$arm64_kernels
	if [ ${#kernels[@]} -gt 0 ]; then
		arch_kernels[$a]="${kernels[*]}"
	else
		arch_kernels[$a]=${KERNELS:-$default}
	fi
	for k in ${arch_kernels[$a]}; do
		case " $all_kernels " in *" $k "*) ;; *) die "unknown kernel $k (want one of: $all_kernels)" ;; esac
	done
done
if [ -n "$shell_cmd" ]; then
	[ ${#arches[@]} -eq 1 ] || die "--shell-cmd needs one architecture (--arch amd64 or arm64)"
	read -r -a one <<<"${arch_kernels[${arches[0]}]}"
	[ ${#one[@]} -eq 1 ] || die "--shell-cmd needs exactly one kernel (--kernel K)"
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
# machine with Go, gcc and git has all but QEMU and a static busybox (and
# for arm64 readelf, which reads the arm64 tools' libraries). make static
# installs the arm64 cross compiler itself (scripts/cross-cc.sh).
need=()
tools="timeout:coreutils flock:util-linux gzip:gzip make:make dpkg-deb:dpkg apt-get:apt apt-cache:apt ldd:libc-bin find:findutils awk:mawk"
for a in "${arches[@]}"; do
	case "$a" in
	amd64) tools="$tools qemu-system-x86_64:qemu-system-x86" ;;
	arm64) tools="$tools qemu-system-aarch64:qemu-system-arm readelf:binutils" ;;
	esac
done
for tp in $tools; do
	command -v "${tp%%:*}" >/dev/null 2>&1 || need+=("${tp#*:}")
done
case " ${arches[*]} " in *" amd64 "*) static_busybox || need+=(busybox-static) ;; esac
# The initramfs is packed by the host's busybox, else by cpio.
[ -x /bin/busybox ] || command -v cpio >/dev/null 2>&1 || need+=(cpio)
if [ ${#need[@]} -gt 0 ]; then
	[ "$(id -u)" = 0 ] || die "missing ${need[*]}: install them (apt-get install ${need[*]}) or run as root"
	log "installing ${need[*]} from this machine's apt sources"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
case " ${arches[*]} " in *" amd64 "*) static_busybox || die "/bin/busybox is not static" ;; esac
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

apt_opts=()
# apt_for DIR ARCH: sets apt_opts, the options of a private apt
# whose sources list, lists and cache are under DIR, for ARCH's packages
# of the suites given as "URI SUITE" lines on stdin.
apt_for() {
	local dir=$1 arch=$2 uri suite
	mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
	: >"$dir/sources.list"
	while read -r uri suite; do
		echo "deb ${keyring}$uri $suite main" >>"$dir/sources.list"
	done
	apt_opts=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o Dir::Etc::sourceparts=- -o "Dir::State::Lists=$dir/lists"
		-o "Dir::Cache=$dir/cache" -o Dir::State::status=/dev/null -o APT::Sandbox::User=root -o Debug::NoLocking=1
		-o "APT::Architecture=$arch" -o "APT::Architectures=$arch" -q)
}

# fetch_deb DIR ARCH PACKAGE VERSION: prints the path of PACKAGE's .deb of
# VERSION for ARCH in DIR, downloading it there (with apt_opts) when it
# isn't yet; nothing when it can't be had.
fetch_deb() {
	local dir=$1 arch=$2 p=$3 ver=$4 deb
	deb=$(cached_deb "$@")
	if [ -z "$deb" ] && [ "$offline" = 0 ]; then
		(cd "$dir" && apt-get "${apt_opts[@]}" download "$p=$ver" >>"$dir/download.log" 2>&1) || true
		deb=$(cached_deb "$@")
	fi
	[ -z "$deb" ] || echo "$deb"
}

# cached_deb DIR ARCH PACKAGE VERSION: the .deb in DIR that is PACKAGE
# VERSION for ARCH (or for all architectures), if any.
cached_deb() {
	local d
	for d in "$1/${3}"_*.deb; do
		[ -f "$d" ] || continue
		[ "$(dpkg-deb -f "$d" Package)" = "$3" ] && [ "$(dpkg-deb -f "$d" Version)" = "$4" ] || continue
		case "$(dpkg-deb -f "$d" Architecture)" in "$2" | all) echo "$d" && return ;; esac
	done
}

# fetch_kernel ARCH KERNEL: prints "PACKAGE VERSION VMLINUZ" of the newest
# cloud kernel for ARCH of KERNEL's suites, downloaded and extracted into
# the cache, or nothing when it can't be fetched (and no earlier download
# is cached).
fetch_kernel() {
	local a=$1 k=$2 tag=$2
	[ "$a" = amd64 ] || tag=$a-$k
	local dir="$cache/apt/$tag"
	mkdir -p "$cache/debs" "$cache/kernels"
	apt_for "$dir" "$a" < <(suites_of "$k")
	local current="$cache/current-$tag"
	if [ "$offline" = 0 ] && ! apt-get "${apt_opts[@]}" update >"$dir/update.log" 2>&1; then
		log "$tag: package lists of $(suites_of "$k" | awk '{print $2}' | tr '\n' ' ')unreachable (see $dir/update.log)"
	fi
	local pkg ver
	pkg=$(apt-cache "${apt_opts[@]}" depends "linux-image-cloud-$a" 2>/dev/null | awk '$1 == "Depends:" && $2 ~ /^linux-image-/ { print $2; exit }' || true)
	if [ -n "$pkg" ]; then
		ver=$(apt-cache "${apt_opts[@]}" show --no-all-versions "$pkg" 2>/dev/null | awk '$1 == "Version:" { print $2; exit }' || true)
	fi
	if [ -n "$pkg" ] && [ -n "${ver:-}" ]; then
		local kdir="$cache/kernels/${pkg}_$ver"
		if [ ! -f "$kdir/.done" ] || [ -z "$(find_vmlinuz "$kdir")" ]; then
			rm -rf "$kdir"
			# Newer kernels ship vmlinuz in linux-binary-ABI, a dependency
			# of linux-image-ABI of the same version.
			local p deb ok=1
			for p in "$pkg" $(apt-cache "${apt_opts[@]}" show --no-all-versions "$pkg" 2>/dev/null |
				awk '$1 == "Depends:"' | tr ',' '\n' | grep -o 'linux-binary-[^ ]*' || true); do
				deb=$(fetch_deb "$cache/debs" "$a" "$p" "$ver")
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

# The arm64 VM's tools come from Debian bookworm's arm64 packages (the
# host's tools are amd64): these, with every library package they depend
# on, downloaded into the cache and extracted into a staging tree.
arm64_suite=bookworm
arm64_packages="dash coreutils util-linux busybox-static"

# arm64_userland DIR: extracts the arm64 packages into DIR, or dies saying
# which could not be fetched.
arm64_userland() {
	local stage=$1 adir="$cache/apt/arm64-userland" debs="$cache/debs-arm64"
	mkdir -p "$debs" "$stage"
	apt_for "$adir" arm64 < <(
		echo "$mirror_main $arm64_suite"
		[ -z "$mirror_security" ] || echo "$mirror_security $arm64_suite-security"
	)
	if [ "$offline" = 0 ] && ! apt-get "${apt_opts[@]}" update >"$adir/update.log" 2>&1; then
		log "arm64 tools: package lists of $arm64_suite unreachable (see $adir/update.log)"
	fi
	[ ${#apt_opts[@]} -gt 0 ] || die "arm64 tools: no private apt configuration"
	# The tools' packages and, of their dependencies (recursively), the
	# libraries: what their binaries may load.
	local pkgs p ver deb
	# shellcheck disable=SC2086
	pkgs=$(apt-cache "${apt_opts[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts --no-breaks \
		--no-replaces --no-enhances $arm64_packages 2>/dev/null | awk '/^[a-z0-9]/ && ($1 ~ /^(lib|zlib)/ || index(" " pkgs " ", " " $1 " "))' pkgs="$arm64_packages" | sort -u)
	[ -n "$pkgs" ] || die "arm64 tools: no package list for $arm64_suite/arm64 (see $adir/update.log)"
	for p in $pkgs; do
		ver=$(apt-cache "${apt_opts[@]}" show --no-all-versions "$p" 2>/dev/null | awk '$1 == "Version:" { print $2; exit }' || true)
		# A library another package provides instead (an alternative) may
		# have no candidate: what the binaries need is checked below.
		[ -n "$ver" ] || continue
		deb=$(fetch_deb "$debs" arm64 "$p" "$ver")
		if [ -z "$deb" ]; then
			case " $arm64_packages " in *" $p "*) die "arm64 tools: $p $ver could not be fetched (see $debs/download.log)" ;; esac
			log "arm64 tools: library package $p $ver could not be fetched"
			continue
		fi
		dpkg-deb -x "$deb" "$stage"
	done
}

# elf_needs FILE: its program interpreter and the sonames it needs.
elf_needs() {
	readelf -lW "$1" 2>/dev/null | sed -n 's/.*\[Requesting program interpreter: \(.*\)\]/\1/p'
	readelf -dW "$1" 2>/dev/null | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
}

# copy_with_libs STAGE FILE DEST ROOT: copies FILE (a path in STAGE) to
# ROOT/DEST, and every library it needs, transitively, from STAGE's
# multiarch library directories to the same path under ROOT.
copy_with_libs() {
	local stage=$1 file=$2 dest=$3 root=$4 n lib found dir
	cp -L "$stage$file" "$root$dest"
	local queue=("$stage$file")
	while [ ${#queue[@]} -gt 0 ]; do
		local f=${queue[0]}
		queue=("${queue[@]:1}")
		for n in $(elf_needs "$f"); do
			found=""
			case "$n" in
			/*) found=$n ;;
			*)
				for dir in /lib/aarch64-linux-gnu /usr/lib/aarch64-linux-gnu /lib /usr/lib; do
					if [ -e "$stage$dir/$n" ]; then
						found=$dir/$n
						break
					fi
				done
				;;
			esac
			[ -n "$found" ] && [ -e "$stage$found" ] || die "arm64 tools: ${f#"$stage"} needs $n, which no fetched package has"
			[ -e "$root$found" ] && continue
			mkdir -p "$root$(dirname "$found")"
			cp -L "$stage$found" "$root$found"
			queue+=("$stage$found")
		done
	done
}

# ---- the initramfs --------------------------------------------------------

work=$(mktemp -d "${TMPDIR:-/tmp}/kmatrix.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The tools the tests depend on with their options (setsid -f, unshare
# --fork, nohup, setpriv are missing or different in busybox).
vm_tools="sh sleep setsid nohup env unshare setpriv true false cat touch"

plan=$work/plan
if [ -n "$shell_cmd" ]; then
	printf 'shell\t%s\t%s\n' "$shell_timeout" "$shell_cmd" >"$plan"
else
	grep -v '^#' "$scenarios" | grep -v '^[[:space:]]*$' >"$plan"
fi

# elf_machine FILE: the architecture an ELF file is built for, in Go's words.
elf_machine() {
	case "$(readelf -hW "$1" 2>/dev/null | awk -F: '$1 ~ /Machine/ { gsub(/^ +/, "", $2); print $2 }')" in
	"Advanced Micro Devices X86-64") echo amd64 ;;
	AArch64) echo arm64 ;;
	*) echo unknown ;;
	esac
}

# build_initramfs ARCH: $work/ARCH/initrd.gz: the static binaries built
# for ARCH (make static, and the test binary), ARCH's tools and busybox,
# the init and the plan.
build_initramfs() {
	local a=$1 w=$work/$1
	local root=$w/root
	mkdir -p "$root"/{bin,sbin,proc,sys,dev,tmp,etc,kmatrix}
	log "$a: building static binaries"
	local t0
	t0=$(date +%s)
	make -s -C "$tree" static GOARCH="$a" STATIC="$w/lineage" STATIC_TRACKER="$w/lineage-tracker" >"$w/build.log" 2>&1 ||
		die "$a: make static GOARCH=$a failed: $(tail -n 20 "$w/build.log")"
	(cd "$tree" && GOARCH=$a CGO_ENABLED=0 go test -c -o "$w/lineage.test" ./test/e2e) ||
		die "$a: go test -c ./test/e2e failed"
	local b
	for b in lineage lineage-tracker lineage.test; do
		if command -v readelf >/dev/null 2>&1 && [ "$(elf_machine "$w/$b")" != "$a" ]; then
			die "$a: $b was built for $(elf_machine "$w/$b"), not $a (does $tree's make static know GOARCH?)"
		fi
	done
	case "$a" in
	amd64)
		cp /bin/busybox "$root/bin/busybox"
		for b in $(/bin/busybox --list); do
			[ "$b" = busybox ] || ln -sf busybox "$root/bin/$b"
		done
		local t p
		for t in $vm_tools; do
			p=$(type -P "$t") || die "$t is missing on this machine"
			p=$(readlink -f "$p")
			rm -f "$root/bin/$t"
			cp "$p" "$root/bin/$t"
			ldd "$p" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | while read -r lib; do
				mkdir -p "$root$(dirname "$lib")"
				cp -L "$lib" "$root$lib"
			done
		done
		;;
	arm64)
		local stage=$w/stage t p
		arm64_userland "$stage"
		[ -f "$stage/bin/busybox" ] || die "arm64 tools: busybox-static has no /bin/busybox"
		cp "$stage/bin/busybox" "$root/bin/busybox"
		# Its applets are linked at boot (/init): it can't run here.
		for t in $vm_tools; do
			[ "$t" = sh ] && p=/bin/dash || p=""
			if [ -z "$p" ]; then
				for p in /bin/$t /usr/bin/$t /sbin/$t /usr/sbin/$t ""; do
					[ -n "$p" ] && [ -f "$stage$p" ] && break
				done
			fi
			[ -n "$p" ] && [ -f "$stage$p" ] || die "arm64 tools: no $t in $arm64_packages"
			copy_with_libs "$stage" "$p" "/bin/$t" "$root"
		done
		;;
	esac
	cp "$w/lineage" "$w/lineage-tracker" "$w/lineage.test" "$root/bin/"
	cp "$here/init" "$root/init"
	chmod 755 "$root/init"
	echo "root:x:0:0:root:/tmp:/bin/sh" >"$root/etc/passwd"
	echo "root:x:0:" >"$root/etc/group"
	cp "$plan" "$root/kmatrix/plan"
	(cd "$root" && find . | cpio_newc) | gzip -1 >"$w/initrd.gz"
	log "$a: built in $(($(date +%s) - t0))s: initramfs $(du -h "$w/initrd.gz" | cut -f1)"
}

# cpio_newc: the file names on stdin as a newc archive, by the host's
# busybox, else cpio.
cpio_newc() {
	if [ -x /bin/busybox ]; then
		/bin/busybox cpio -o -H newc 2>/dev/null
	else
		cpio -o -H newc 2>/dev/null
	fi
}

exec 9>"$cache/.lock"
log "tree $tree ($(git -C "$tree" describe --always --dirty 2>/dev/null || echo 'not git'))"
for a in "${arches[@]}"; do
	# Two runs sharing the cache don't fetch at once.
	flock 9
	build_initramfs "$a"
	flock -u 9
done

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

# boot ARCH VMLINUZ LOG: one VM; its console goes to LOG (and to the
# terminal for --shell-cmd). timeout(1) in --foreground mode signals only
# QEMU, its own child, by pid. arm64 boots QEMU's virt board with its
# PL011 console; pointer authentication with QEMU's own cipher
# (pauth-impdef) rather than the architected one, which TCG computes
# slowly, still -cpu max.
boot() {
	local qemu machine console
	case "$1" in
	amd64) qemu=qemu-system-x86_64 machine=(-cpu max) console=ttyS0 ;;
	arm64) qemu=qemu-system-aarch64 machine=(-M virt -cpu max,pauth-impdef=on) console=ttyAMA0 ;;
	esac
	local args=(-accel tcg "${machine[@]}" -smp 1 -m "${KMATRIX_MEM:-1G}" -nographic -no-reboot -nic none
		-kernel "$2" -initrd "$work/$1/initrd.gz"
		-append "console=$console panic=-1 oops=panic loglevel=4 random.trust_cpu=on rdinit=/init")
	if [ -n "$shell_cmd" ]; then
		timeout --foreground -k 10 "$vm_timeout" "$qemu" "${args[@]}" </dev/null 2>&1 | clean | tee "$3"
	else
		timeout --foreground -k 10 "$vm_timeout" "$qemu" "${args[@]}" </dev/null 2>&1 | clean >"$3"
	fi
}

# ---- run ------------------------------------------------------------------

summary=$out/summary.txt
: >"$summary"
failed=0
xfailed=0
declare -A result
declare -A kinfo
declare -A ran
# The kernels run, as labels: the kernel for amd64, arm64-KERNEL for arm64.
labels=()

for a in "${arches[@]}"; do
	ran[$a]=0
	for k in ${arch_kernels[$a]}; do
		label=$k
		[ "$a" = amd64 ] || label=$a-$k
		labels+=("$label")
		flock 9
		info=$(fetch_kernel "$a" "$k")
		flock -u 9
		if [ -z "$info" ]; then
			log "$label: SKIPPED: no kernel package could be fetched"
			kinfo[$label]="skipped (package not fetched)"
			continue
		fi
		read -r pkg ver vmlinuz <<<"$info"
		log "$label: $pkg $ver: booting"
		vmlog=$out/$label.log
		t0=$(date +%s)
		rc=0
		boot "$a" "$vmlinuz" "$vmlog" || rc=$?
		took=$(($(date +%s) - t0))
		uname=$(awk '$1 == "KMATRIX-KERNEL" { print $2; exit }' "$vmlog")
		booted=$(awk '$1 == "KMATRIX-BOOTED" { sub(/uptime=/, "", $2); print $2; exit }' "$vmlog")
		kinfo[$label]="$pkg $ver (uname ${uname:-?}), boot ${booted:-?}, VM ${took}s"
		echo "== $label: $pkg $ver, uname ${uname:-none}, booted at ${booted:-never}, VM ${took}s (qemu exit $rc)" | tee -a "$summary"
		if [ -n "$shell_cmd" ]; then
			end=$(awk '$1 == "KMATRIX-END" { print $4; exit }' "$vmlog")
			echo "kmatrix: log $vmlog" >&2
			[ -n "$end" ] || die "the VM ended before the command did (qemu exit $rc)"
			exit "${end#rc=}"
		fi
		ran[$a]=$((ran[$a] + 1))
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
					case "$label:$name" in $pat) xf=1 ;; esac
				done
				if [ $xf = 1 ]; then
					mark=" (expected)"
					xfailed=$((xfailed + 1))
				else
					failed=$((failed + 1))
				fi
			fi
			result[$label/$name]="$res$mark"
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
done

[ -z "$shell_cmd" ] || die "kernel ${labels[0]} is not available"

# The matrix: kernels by scenarios.
{
	echo
	printf '%-10s' kernel
	while IFS=$'\t' read -r name _ _; do printf ' %-18s' "$name"; done <"$plan"
	echo
	for k in "${labels[@]}"; do
		printf '%-10s' "$k"
		while IFS=$'\t' read -r name _ _; do printf ' %-18s' "${result[$k/$name]:-skipped}"; done <"$plan"
		echo
	done
	echo
	for k in "${labels[@]}"; do echo "$k: ${kinfo[$k]}"; done
	echo "total: $(($(date +%s) - started))s (build, downloads and every VM)"
} | tee -a "$summary"

status=0
total=0
for a in "${arches[@]}"; do
	read -r -a asked <<<"${arch_kernels[$a]}"
	want=3
	[ ${#asked[@]} -lt 3 ] && want=${#asked[@]}
	total=$((total + ran[$a]))
	if [ "${ran[$a]}" -lt "$want" ]; then
		echo "kmatrix: FAIL: $a: ${ran[$a]} kernels ran, want at least $want" | tee -a "$summary"
		status=1
	fi
done
if [ "$failed" -gt 0 ]; then
	if [ "${KMATRIX_ALLOW_FAIL:-0}" = 1 ]; then
		echo "kmatrix: $failed scenario failures, allowed (KMATRIX_ALLOW_FAIL=1)" | tee -a "$summary"
	else
		echo "kmatrix: FAIL: $failed scenario failures" | tee -a "$summary"
		status=1
	fi
fi
[ "$xfailed" -gt 0 ] && echo "kmatrix: $xfailed expected failures (KMATRIX_XFAIL)" | tee -a "$summary"
[ "$status" = 0 ] && echo "kmatrix: PASS: $total kernels ran (${arches[*]})" | tee -a "$summary"
echo "kmatrix: logs in $out" >&2
exit "$status"
