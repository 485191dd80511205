#!/bin/sh
# ctest wrapper for the node tests: copies them into the build tree,
# installs their npm packages from package-lock.json (offline cache first),
# and runs one. Exits 77 (SKIP) with the reason when node, the packages or
# chromium cannot be had. Usage: run.sh TEST.mjs WASTE CONTAINER WORKDIR
# package.json overrides zod to ^3.25: puppeteer-core's chromium-bidi pins
# 3.23.8 while @anthropic-ai/sdk's optional peer asks for >= 3.25 (npm ci
# refuses the conflict); 3.25 keeps 3.23's API.
set -u
test_file=$1 waste=$2 container=$3 work=$4
src=$(cd "$(dirname "$0")" && pwd)
skip() { echo "SKIP: $*"; exit 77; }
command -v node >/dev/null 2>&1 || skip "node is not installed (apt-get install nodejs npm)"
command -v npm >/dev/null 2>&1 || skip "npm is not installed (apt-get install npm)"
[ -d "$container" ] || skip "no container at $container (the shared fixtures are missing)"
case "$test_file" in
  chat_page_test.mjs)
    [ -x "${CHROMIUM:-/usr/bin/chromium}" ] || skip "chromium is not installed (apt-get install chromium)";;
esac
mkdir -p "$work"
cp "$src/package.json" "$src/package-lock.json" "$src"/*.mjs "$work/"
cd "$work" || exit 1
if [ ! -d node_modules/openai ] || [ ! -d node_modules/puppeteer-core ] ||
   [ ! -d node_modules/@anthropic-ai/sdk ] ||
   ! cmp -s package-lock.json node_modules/.package-lock.json.copy; then
  if ! npm ci --prefer-offline --no-audit --no-fund --ignore-scripts >npm.log 2>&1; then
    skip "npm ci failed (no registry and no cache?): $(tail -n 3 npm.log | tr '\n' ' ')"
  fi
  cp package-lock.json node_modules/.package-lock.json.copy
fi
exec node "$test_file" "$waste" "$container" "$work"
