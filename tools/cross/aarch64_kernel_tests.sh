#!/usr/bin/env bash
# Cross-compiles the baseline and NEON kernels with the self-contained
# driver tests/kernels/neon_selftest.cc for aarch64 (static, so qemu needs no
# sysroot) and runs it under qemu-aarch64: NEON must match the baseline on
# every slot it implements. Exit 77 (ctest SKIP) when the cross compiler or
# qemu is missing.
#
# usage: tools/cross/aarch64_kernel_tests.sh [BUILD_DIR]
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
out="${1:-${root}/build-aarch64-kernels}"
cxx="${AARCH64_CXX:-aarch64-linux-gnu-g++}"
qemu="${QEMU_AARCH64:-qemu-aarch64}"

if ! command -v "${cxx}" > /dev/null 2>&1; then
  echo "SKIP: ${cxx} not found (apt-get install g++-aarch64-linux-gnu)"
  exit 77
fi
if ! command -v "${qemu}" > /dev/null 2>&1; then
  echo "SKIP: ${qemu} not found (apt-get install qemu-user)"
  exit 77
fi

mkdir -p "${out}"
bin="${out}/neon_selftest"
# -ffp-contract=off as in the real build: the baseline is the reference and
# must not have multiply-adds fused by the compiler.
"${cxx}" -std=c++20 -O2 -static -ffp-contract=off -Wall -Wextra -Wno-unused-parameter \
  -I"${root}/include" -I"${root}/src" -I"${root}/tests" \
  "${root}/src/kernels/baseline.cc" \
  "${root}/src/kernels/neon.cc" \
  "${root}/tests/kernels/kernel_checks.cc" \
  "${root}/tests/kernels/neon_selftest.cc" \
  -o "${bin}"

"${qemu}" "${bin}"
