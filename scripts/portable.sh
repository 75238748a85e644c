#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# make portable: copies cgbpf and the injection library into one folder
# that runs on another Linux host (a GPU machine without libbpf, libelf or
# libdw installed), and checks that it would:
#   cgbpf      statically linked (the Makefile links it -static), or at most
#              against libc, libm, libpthread, libdl and the loader;
#   inject/    libcgbpf-inject.so (or libcgbpf-nvtx.so from before the
#              rename; a real file, not a link) needing nothing beyond those; the newest glibc
#              symbol version it needs is printed, since the host's glibc
#              must be at least that.
# Usage: scripts/portable.sh BUILD_DIR DEST_DIR
set -eu
build=${1:?usage: portable.sh BUILD_DIR DEST_DIR}
dest=${2:?usage: portable.sh BUILD_DIR DEST_DIR}
top=$(cd "$(dirname "$0")/.." && pwd)

die() {
	echo "portable: $*" >&2
	exit 1
}

# Only these may be NEEDED: every Linux host has them.
allowed='^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|ld-linux-x86-64\.so\.2|ld-linux-aarch64\.so\.1)$'

needed() {
	readelf -d "$1" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
}

check_needed() {
	local f=$1 lib
	for lib in $(needed "$f"); do
		[[ $lib =~ $allowed ]] ||
			die "$f needs $lib, which a GPU host may lack: link it statically (the Makefile's LIBS_STATIC / LIBS_DW; Debian's -dev packages ship the .a files)"
	done
}

glibc_max() {
	objdump -T "$1" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -u -V | tail -1
}

[ -x "$build/cgbpf" ] || die "$build/cgbpf is not built (make all first)"
# The current name, else the one from before the rename (then a link to
# the current one, which cgbpf no longer looks for: one copy is enough).
libs=()
for n in libcgbpf-inject.so libcgbpf-nvtx.so; do
	if [ -e "$build/inject/$n" ]; then
		libs=("$n")
		break
	fi
done
[ ${#libs[@]} -gt 0 ] ||
	die "no injection library in $build/inject (make inject; needs <sys/sdt.h>: make deps)"

rm -rf "$dest"
mkdir -p "$dest/inject"
cp "$build/cgbpf" "$dest/cgbpf"
# Real files, no links: the copy may travel through tools that drop them.
for n in "${libs[@]}"; do
	cp -L "$build/inject/$n" "$dest/inject/$n"
done

if readelf -d "$dest/cgbpf" | grep -q '(NEEDED)'; then
	check_needed "$dest/cgbpf"
	link="dynamic: $(needed "$dest/cgbpf" | tr '\n' ' ')"
else
	readelf -l "$dest/cgbpf" | grep -q INTERP &&
		die "$dest/cgbpf has an interpreter but no NEEDED entries: unexpected link"
	link="static"
fi
"$dest/cgbpf" --version >/dev/null ||
	die "$dest/cgbpf --version failed: the copy does not run here"

{
	echo "cgbpf portable build"
	echo "version: $("$dest/cgbpf" --version)"
	echo "commit: $(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)"
	echo "built on: $(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -m)"
	echo "cgbpf: $link"
	for n in "${libs[@]}"; do
		f=$dest/inject/$n
		check_needed "$f"
		gpu=no
		grep -qaP '\x00InitializeInjection\x00' "$f" && gpu=yes
		echo "inject/$n: needs $(needed "$f" | tr '\n' ' ')(glibc >= $(glibc_max "$f" | sed 's/GLIBC_//')); CUPTI part (InitializeInjection): $gpu"
	done
} >"$dest/BUILD-INFO"
sed 's/^/  /' "$dest/BUILD-INFO"
