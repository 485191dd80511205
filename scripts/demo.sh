#!/bin/sh
# Configures and builds waste (Release, in build/), which also generates the
# demo container at build/demo, then runs one generation on it.
# Usage: scripts/demo.sh ["prompt"]
set -eu
cd "$(dirname "$0")/.."

JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$JOBS"

PROMPT="${1:-Once upon a time}"
echo
echo "\$ build/waste run build/demo \"$PROMPT\" -n 32"
exec build/waste run build/demo "$PROMPT" -n 32
