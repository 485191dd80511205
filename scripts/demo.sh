#!/bin/sh
# Configures and builds waste (Release, in build/), which also converts the
# demo model (demo-model/: a tiny Kimi-Linear model trained on the King James
# Bible) into the container build/demo, then continues a prompt with it.
# Usage: scripts/demo.sh ["prompt"]
#
# --raw: continue the text as written (the container also has a chat
# template; `build/waste chat build/demo` uses it). The model is small and
# briefly trained, so it samples (temperature 0.8, top-k 40, fixed seed:
# the same words every run) rather than decoding greedily, which loops.
set -eu
cd "$(dirname "$0")/.."

JOBS="${JOBS:-$(nproc 2>/dev/null || echo 2)}"
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$JOBS"

PROMPT="${1:-And it came to pass}"
echo
echo "\$ build/waste run build/demo --raw \"$PROMPT\" -n 32 --temp 0.8 --top-k 40 --seed 7"
exec build/waste run build/demo --raw "$PROMPT" -n 32 --temp 0.8 --top-k 40 --seed 7
