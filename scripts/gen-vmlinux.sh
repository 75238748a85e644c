#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Regenerates vmlinux/<arch>/vmlinux.h from the running kernel's BTF.
# The checked-in copy is what builds use; CO-RE relocations make programs
# built against it load on other kernels with BTF.
set -euo pipefail
arch=$(uname -m | sed 's/x86_64/x86/;s/aarch64/arm64/')
top=$(cd "$(dirname "$0")/.." && pwd)
btf=${1:-/sys/kernel/btf/vmlinux}
[ -r "$btf" ] || { echo "gen-vmlinux: $btf not readable: kernel built without CONFIG_DEBUG_INFO_BTF?" >&2; exit 1; }
mkdir -p "$top/vmlinux/$arch"
bpftool btf dump file "$btf" format c > "$top/vmlinux/$arch/vmlinux.h.tmp"
mv "$top/vmlinux/$arch/vmlinux.h.tmp" "$top/vmlinux/$arch/vmlinux.h"
echo "wrote vmlinux/$arch/vmlinux.h ($(wc -l < "$top/vmlinux/$arch/vmlinux.h") lines) from $btf"
