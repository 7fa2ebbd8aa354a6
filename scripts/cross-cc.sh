#!/bin/sh
# cross-cc.sh GOARCH: prints the C compiler that builds the front's C fast
# path (internal/fastexec) for GOARCH on this machine, for make static:
# nothing for the machine's own architecture (cgo's default compiler), else
# Debian's cross compiler, which it installs with the target's static libc
# (gcc-aarch64-linux-gnu and libc6-dev-arm64-cross for arm64) when missing
# and it runs as root. Fails, saying what to install, when it can't.
set -eu
goarch=${1:?usage: cross-cc.sh GOARCH}
command -v go >/dev/null 2>&1 || PATH="$PATH:/usr/local/go/bin"
host=$(go env GOHOSTARCH)
[ "$goarch" != "$host" ] || exit 0
case "$goarch" in
arm64) triplet=aarch64-linux-gnu debarch=arm64 ;;
amd64) triplet=x86_64-linux-gnu debarch=amd64 ;;
*)
	echo "cross-cc.sh: no cross compiler known for GOARCH=$goarch; FRONT_CGO=0 builds the front without its C fast path" >&2
	exit 1
	;;
esac
cc=$triplet-gcc
# has_libc: the compiler and the target's static C library, which the
# front links.
has_libc() {
	command -v "$cc" >/dev/null 2>&1 && case "$("$cc" -print-file-name=libc.a 2>/dev/null)" in /*) true ;; *) false ;; esac
}
if ! has_libc; then
	pkgs="gcc-$triplet libc6-dev-$debarch-cross"
	if [ "$(id -u)" != 0 ]; then
		echo "cross-cc.sh: $cc or its static libc is missing: apt-get install $pkgs (or FRONT_CGO=0: no C fast path)" >&2
		exit 1
	fi
	echo "cross-cc.sh: installing $pkgs from this machine's apt sources" >&2
	apt-get update -qq >&2
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $pkgs >&2
	has_libc || { echo "cross-cc.sh: $cc still has no static libc after installing $pkgs" >&2; exit 1; }
fi
echo "$cc"
