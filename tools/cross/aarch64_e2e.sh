#!/usr/bin/env bash
# End-to-end on aarch64 under qemu-user: cross-builds the real `waste` CLI
# (waste_core with the NEON kernels) with cmake/toolchains/aarch64-linux-gnu.cmake
# against Debian's arm64 multiarch packages, then under qemu-aarch64
#   * `waste version` must name the NEON backend;
#   * `waste eval <warp-tiny>/container --ids <prompt> --logits-out X` must
#     match the fixture's logits_last.f32 at max|d| <= 1e-4 * max|logit|.
# Exit 0 pass, 1 fail, 77 skip (ctest SKIP_RETURN_CODE) with the reason when
# the cross compiler, qemu, the arm64 dev packages, python3 or the fixture
# is missing. scripts/setup.sh installs everything it needs.
#
# usage: tools/cross/aarch64_e2e.sh [FIXTURES_DIR [BUILD_DIR]]
#   FIXTURES_DIR  default: ../shared/fixtures relative to the repository root
#   BUILD_DIR     default: build-aarch64/ in the repository root
#   JOBS=N        parallel compile jobs (default 2)
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
fixtures="${1:-${root}/../shared/fixtures}"
out="${2:-${root}/build-aarch64}"
jobs="${JOBS:-2}"
triple=aarch64-linux-gnu
qemu="${QEMU_AARCH64:-qemu-aarch64}"
set_name=warp-tiny
fixture="${fixtures}/${set_name}"

skip() {
  echo "SKIP: $*"
  exit 77
}
now() { date +%s; }

# --- prerequisites (skip, never fail, when the host lacks them) -------------
command -v "${triple}-g++" > /dev/null 2>&1 ||
  skip "${triple}-g++ not found (apt-get install g++-${triple})"
command -v "${qemu}" > /dev/null 2>&1 || skip "${qemu} not found (apt-get install qemu-user)"
command -v cmake > /dev/null 2>&1 || skip "cmake not found"
# The arm64 halves of the engine's dependencies (Debian multiarch). The
# loader and libc come with them (libc6:arm64).
arm64_pkgs="zlib1g-dev:arm64 libpcre2-dev:arm64 libfmt-dev:arm64 libcpu-features-dev:arm64"
missing=""
for f in /usr/lib/${triple}/pkgconfig/zlib.pc \
  /usr/lib/${triple}/pkgconfig/libpcre2-8.pc \
  /usr/lib/${triple}/cmake/fmt/fmt-config.cmake \
  /usr/lib/${triple}/cmake/CpuFeatures/CpuFeaturesConfig.cmake \
  /lib/ld-linux-aarch64.so.1; do
  [ -e "${f}" ] || missing="${missing} ${f}"
done
[ -z "${missing}" ] || skip "arm64 dev packages missing (${missing# }): dpkg --add-architecture arm64;" \
  "apt-get update; apt-get install ${arm64_pkgs} (or run scripts/setup.sh)"
for f in "${fixture}/container/manifest.json" "${fixture}/prompt_ids.json" "${fixture}/logits_last.f32"; do
  [ -e "${f}" ] || skip "fixture file ${f} not found (fixtures dir: ${fixtures})"
done
python=""
for p in /usr/bin/python3 python3; do
  if command -v "${p}" > /dev/null 2>&1; then
    python="$(command -v "${p}")"
    break
  fi
done
[ -n "${python}" ] || skip "python3 not found (needed to compare the logits)"

# --- cross build ------------------------------------------------------------
generator=()
if command -v ninja > /dev/null 2>&1; then generator=(-G Ninja); fi
mkdir -p "${out}"
t0=$(now)
if [ ! -f "${out}/CMakeCache.txt" ]; then
  cmake -S "${root}" -B "${out}" "${generator[@]}" \
    -DCMAKE_TOOLCHAIN_FILE="${root}/cmake/toolchains/${triple}.cmake" \
    -DCMAKE_BUILD_TYPE=Release -DBUILD_TESTING=OFF -DWASTE_BUILD_TOOLS=OFF \
    -DWASTE_BUILD_BENCH=OFF -DWASTE_ENABLE_IO_URING=OFF > "${out}/configure.log" 2>&1 || {
    cat "${out}/configure.log"
    echo "FAIL: cross configure failed"
    exit 1
  }
fi
t1=$(now)
if ! cmake --build "${out}" --target waste -j "${jobs}"; then
  echo "FAIL: cross build of waste failed"
  exit 1
fi
t2=$(now)
waste="${out}/waste"
file_out="$(file -b "${waste}" 2> /dev/null || true)"
echo "built: ${waste}: ${file_out:-?}"

# --- run under qemu ---------------------------------------------------------
# No -L: the multiarch libc6:arm64 provides /lib/ld-linux-aarch64.so.1 and
# the libraries in /usr/lib/aarch64-linux-gnu. (-L /usr/aarch64-linux-gnu
# would pair the cross toolchain's loader with the multiarch libc.so.6, two
# different glibc builds, and pthread_create then spins forever.)
unset QEMU_LD_PREFIX
run_qemu() {
  if command -v timeout > /dev/null 2>&1; then
    timeout 300 "${qemu}" "$@"
  else
    "${qemu}" "$@"
  fi
}

status=0
rc=0
version="$(run_qemu "${waste}" version 2>&1)" || rc=$?
if [ "${rc}" != 0 ]; then
  echo "${version}"
  echo "FAIL: waste version exited ${rc} under qemu"
  exit 1
fi
echo "waste version (qemu): ${version}"
if ! grep -q "backend NEON" <<< "${version}"; then
  echo "FAIL: waste version does not name the NEON backend"
  status=1
fi

ids="$(tr '[],\n' '    ' < "${fixture}/prompt_ids.json" | tr -s ' ' | sed 's/^ //; s/ $//')"
logits="${out}/${set_name}.logits_last.f32"
rm -f "${logits}"
t3=$(now)
rc=0
run_qemu "${waste}" eval "${fixture}/container" --ids "${ids}" --logits-out "${logits}" || rc=$?
t4=$(now)
if [ "${rc}" != 0 ] || [ ! -s "${logits}" ]; then
  echo "FAIL: waste eval exited ${rc} under qemu (124 = timed out after 300 s)"
  exit 1
fi

echo "compare ${logits} with ${fixture}/logits_last.f32 (rel 1e-4):"
if "${python}" -c "import numpy" > /dev/null 2>&1; then
  "${python}" "${root}/tools/oracle/compare.py" "${fixture}/logits_last.f32" "${logits}" --rel 1e-4 ||
    status=1
else
  # No numpy: the same test in plain Python.
  "${python}" - "${fixture}/logits_last.f32" "${logits}" << 'EOF' || status=1
import math, struct, sys
def load(p):
    b = open(p, "rb").read()
    return struct.unpack("<%df" % (len(b) // 4), b[: len(b) // 4 * 4]), len(b)
(a, na), (b, nb) = load(sys.argv[1]), load(sys.argv[2])
if na != nb or na == 0 or na % 4:
    print("size mismatch or empty: %d vs %d bytes" % (na, nb)); sys.exit(1)
if not all(math.isfinite(x) for x in a + b):
    print("non-finite values present"); sys.exit(1)
d = [abs(x - y) for x, y in zip(a, b)]
mx, ma = max(d), max(abs(x) for x in a)
arg = lambda v: max(range(len(v)), key=v.__getitem__)
print("n=%d max|d|=%.6g at %d  max|A|=%.6g  rel=%.3g  argmax agree: %s"
      % (len(a), mx, arg(d), ma, mx / ma if ma else 0.0, arg(a) == arg(b)))
if mx > 1e-4 * ma:
    print("FAIL: max|d| > 1e-4 * max|A|"); sys.exit(1)
print("OK (rel tolerance 0.0001)")
EOF
fi

echo "timings: configure $((t1 - t0)) s, build $((t2 - t1)) s, eval under qemu $((t4 - t3)) s"
if [ "${status}" != 0 ]; then
  echo "FAIL: aarch64 end-to-end under qemu"
  exit 1
fi
echo "PASS: aarch64 (NEON) end-to-end on ${set_name} under qemu"
