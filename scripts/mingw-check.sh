#!/bin/sh
# Cross-compiles the base layer (platform shim, cpu lists, cgroups, thread
# pool) for Windows with MinGW-w64 and runs tests/smoke/platform_smoke.cc
# under wine when it is installed. The full Windows build needs MinGW builds
# of fmt, cpu_features, zlib and PCRE2, which Debian does not package; this
# check keeps src/platform/windows.cc honest meanwhile.
# Needs: g++-mingw-w64-x86-64-posix (std::thread), optionally wine64.
set -eu
cd "$(dirname "$0")/.."

CXX="${MINGW_CXX:-x86_64-w64-mingw32-g++-posix}"
OUT=build-mingw
mkdir -p "$OUT"
for src in src/base/status.cc src/platform/windows.cc src/platform/cpu_list.cc \
           src/platform/cgroup.cc src/runtime/thread_pool.cc tests/smoke/platform_smoke.cc; do
  obj="$OUT/$(basename "$src").o"
  echo "  $CXX $src"
  "$CXX" -std=c++20 -O2 -Wall -Wextra -Wshadow -Wno-unused-parameter -Werror \
    -Iinclude -Isrc -c "$src" -o "$obj"
done
"$CXX" -static -o "$OUT/platform_smoke.exe" "$OUT"/*.o
echo "built $OUT/platform_smoke.exe"

WINE=""
for w in wine64 wine /usr/lib/wine/wine64; do
  if command -v "$w" >/dev/null 2>&1; then WINE="$w"; break; fi
done
if [ -z "$WINE" ]; then
  echo "SKIP: wine is not installed; the smoke test was built but not run"
  exit 0
fi
cd "$OUT" && WINEDEBUG=-all "$WINE" platform_smoke.exe
