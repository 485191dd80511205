#!/bin/sh
# Configures, builds and runs the whole test suite (ctest, 2 jobs), then the
# unit tests again under AddressSanitizer + UBSan (the asan-ubsan preset).
# This is README command 2 and what CI runs (.ci/run).
# Usage: scripts/test.sh            SKIP_SANITIZERS=1 skips the second pass
set -eu
cd "$(dirname "$0")/.."

JOBS="${JOBS:-2}"

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$JOBS"
ctest --test-dir build --output-on-failure -j "$JOBS" --timeout 1500

if [ "${SKIP_SANITIZERS:-0}" != 1 ]; then
  cmake --preset asan-ubsan
  # Only what the preset's tests (label unit) run: the whole tree again
  # under the sanitizers would double the build for tests that are not run.
  cmake --build --preset asan-ubsan -j "$JOBS" --target waste_unit_tests
  ctest --preset asan-ubsan -j "$JOBS"
fi
echo "test.sh: all tests passed"
