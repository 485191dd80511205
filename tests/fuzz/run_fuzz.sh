#!/usr/bin/env bash
# Builds tests/fuzz/container_fuzz with clang (libFuzzer + ASan + UBSan) and
# runs it for a bounded time over a seed corpus made from the fixtures.
#   run_fuzz.sh [--seconds N] [--budget N] [--build-dir DIR] [--binary PATH] [--fixtures DIR]
# --budget caps build + run (default 55 s, for the 60 s ctest limit).
# --binary skips the build (a CMake build with -DWASTE_BUILD_FUZZ=ON makes
# one). Exit 0 = no finding, 77 = skipped (no clang or no libFuzzer), other =
# the fuzzer found something (the crashing input is left in the build dir).
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seconds=20
budget=55
started=$SECONDS
build=""
binary=""
fixtures="$root/../shared/fixtures"
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    --fixtures) fixtures=$2; shift 2 ;;
    *) echo "run_fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$build" ] || build="$root/build-fuzz"
mkdir -p "$build" || exit 2

if [ -z "$binary" ] || [ ! -x "$binary" ]; then
  cxx=${CLANGXX:-clang++}
  if ! command -v "$cxx" >/dev/null 2>&1; then
    echo "SKIP: $cxx not found (the fuzzer needs clang with libFuzzer)"
    exit 77
  fi
  probe="$build/probe.cc"
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' > "$probe"
  if ! "$cxx" -fsanitize=fuzzer "$probe" -o "$build/probe" >/dev/null 2>&1; then
    echo "SKIP: $cxx cannot link -fsanitize=fuzzer (libFuzzer runtime missing)"
    exit 77
  fi
  binary="$build/container_fuzz"
  sources=(
    "$here/container_fuzz.cc"
    "$root/src/format/format.cc" "$root/src/format/json_reader.cc" "$root/src/format/rope_config.cc"
    "$root/src/format/manifest.cc" "$root/src/container/tensor_list.cc" "$root/src/container/trunk_stats.cc"
    "$root/src/engine/memplan.cc" "$root/src/base/status.cc"
    "$root/src/vision/vision_plan.cc" "$root/src/vision/vision_config.cc"
    # memplan.cc's PlanMemory needs the platform shim (never called here).
    "$root/src/platform/posix.cc" "$root/src/platform/linux.cc"
    "$root/src/platform/cgroup.cc" "$root/src/platform/cpu_list.cc"
  )
  flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
         -fno-sanitize-recover=undefined -I"$root/include" -I"$root/src")
  mkdir -p "$build/obj"
  newest_header=$(ls -t "$root"/src/*.h "$root"/src/platform/*.h "$root"/include/waste/*.h | head -n 1)
  stale=()
  objs=()
  for f in "${sources[@]}"; do
    o="$build/obj/$(basename "$(dirname "$f")")_$(basename "$f" .cc).o"
    objs+=("$o")
    if [ ! -f "$o" ] || [ "$f" -nt "$o" ] || [ "$newest_header" -nt "$o" ]; then
      stale+=("$f=$o")
    fi
  done
  if [ ${#stale[@]} -gt 0 ] || [ ! -x "$binary" ]; then
    echo "building $binary (${#stale[@]} files)"
    # The whole test has a time budget: a machine too busy to compile in it
    # skips rather than fails (run this script by hand once to warm it).
    left=$((budget - (SECONDS - started) - 15))
    [ "$left" -lt 5 ] && left=5
    if [ ${#stale[@]} -gt 0 ] && ! printf '%s\n' "${stale[@]}" |
        timeout "$left" xargs -P "$(nproc 2>/dev/null || echo 2)" -I{} sh -c \
          'src="${1%%=*}"; obj="${1#*=}"; shift; exec "$@" -c "$src" -o "$obj"' _ {} \
          "$cxx" "${flags[@]}"; then
      if [ $((SECONDS - started)) -ge $((budget - 16)) ]; then
        echo "SKIP: building the fuzzer did not fit in ${budget} s; run $0 by hand once"
        exit 77
      fi
      echo "FAIL: could not build the fuzzer" >&2
      exit 1
    fi
    if ! "$cxx" -fsanitize=fuzzer,address,undefined "${objs[@]}" -lfmt -lz -lpthread \
        -o "$binary"; then
      echo "FAIL: could not link the fuzzer" >&2
      exit 1
    fi
  fi
fi

# Fuzz for what is left of the budget, at most --seconds, at least 5 s.
left=$((budget - (SECONDS - started) - 5))
[ "$left" -lt "$seconds" ] && seconds=$left
[ "$seconds" -lt 5 ] && seconds=5

# Seed corpus: every fixture manifest and record 0 of its first bank.
seeds="$build/seeds"
corpus="$build/corpus"
mkdir -p "$seeds" "$corpus"
n=0
for m in "$fixtures"/*/container/manifest.json; do
  [ -f "$m" ] || continue
  n=$((n + 1))
  cp "$m" "$seeds/manifest-$n.json"
  bank=$(dirname "$m")/experts-L1.bin
  [ -f "$bank" ] && head -c 12288 "$bank" > "$seeds/record-$n.bin"
done
if [ $n -eq 0 ]; then
  echo '{"format_version":0,"config":{"num_hidden_layers":1,"hidden_size":8,"vocab_size":8,"num_attention_heads":1,"kv_lora_rank":8,"qk_nope_head_dim":8,"v_head_dim":8,"intermediate_size":8},"trunk":[]}' > "$seeds/minimal.json"
fi

cd "$build" || exit 2
"$binary" "$corpus" "$seeds" -dict="$here/manifest.dict" -max_total_time="$seconds" \
  -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 2>&1 | tail -n 25
exit "${PIPESTATUS[0]}"
