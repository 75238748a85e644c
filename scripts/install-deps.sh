#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Installs cgbpf's build and test dependencies from Debian packages.
# Quiet and fast when everything is already there; used by `make test`,
# `make demo` and CI. With --bench also what bench/ compares against.
set -euo pipefail

pkgs=(make gcc g++ clang libbpf-dev bpftool libelf-dev libdw-dev zlib1g-dev
      libzstd-dev liblzma-dev libbz2-dev binutils util-linux protobuf-compiler python3-protobuf
      systemtap-sdt-dev curl libclang-rt-dev
      python3-torch	# test_python: real torch frames (CPU build)
      python3.11-dev	# test_pyfind: gen-pyoffsets.sh --check compares Debian's 3.11 headers
      strace libcap2-bin gcc-multilib	# test_inject: a traced target, capsh, a 32-bit one
      prometheus)	# test_prometheus: dist/prometheus rules against a real one (never its service)
[ "${1:-}" = "--bench" ] && pkgs+=(bpftrace linux-perf)

missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "install-deps: missing packages: ${missing[*]}" >&2
	echo "install-deps: run as root (or: sudo apt-get install ${missing[*]})" >&2
	exit 1
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
