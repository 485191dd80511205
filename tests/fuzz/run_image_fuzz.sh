#!/usr/bin/env bash
# Builds tests/fuzz/image_fuzz with clang (libFuzzer + ASan + UBSan) over
# the image decoder and runs it for a bounded time, seeded with the test
# images. Exit 0 = no finding, 77 = skipped (no clang, no libFuzzer, no
# stb_image.h), other = a finding (the input is left in the build dir).
#   run_image_fuzz.sh [--seconds N] [--budget N] [--build-dir DIR]
set -u
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
seconds=20
budget=55
started=$SECONDS
build=""
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    *) echo "run_image_fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$build" ] || build="$root/build-image-fuzz"
mkdir -p "$build" || exit 2

cxx=${CLANGXX:-clang++}
if ! command -v "$cxx" >/dev/null 2>&1; then
  echo "SKIP: $cxx not found (the fuzzer needs clang with libFuzzer)"
  exit 77
fi
stb_flags=$(pkg-config --cflags stb 2>/dev/null)
if [ -z "$stb_flags" ]; then
  [ -f /usr/include/stb/stb_image.h ] && stb_flags="-I/usr/include/stb"
fi
if [ -z "$stb_flags" ]; then
  echo "SKIP: stb_image.h not found (install libstb-dev)"
  exit 77
fi
probe="$build/probe.cc"
printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' > "$probe"
if ! "$cxx" -fsanitize=fuzzer "$probe" -o "$build/probe" >/dev/null 2>&1; then
  echo "SKIP: $cxx cannot link -fsanitize=fuzzer (libFuzzer runtime missing)"
  exit 77
fi
binary="$build/image_fuzz"
sources=(
  "$here/image_fuzz.cc"
  "$root/src/vision/image_decode.cc" "$root/src/vision/decoder_guards.cc" "$root/src/vision/stb_image_impl.cc" "$root/src/base/status.cc"
  "$root/src/platform/posix.cc" "$root/src/platform/linux.cc"
  "$root/src/platform/cgroup.cc" "$root/src/platform/cpu_list.cc"
)
flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
       -fno-sanitize-recover=undefined -I"$root/include" -I"$root/src" $stb_flags)
mkdir -p "$build/obj"
objs=()
stale=()
for f in "${sources[@]}"; do
  o="$build/obj/$(basename "$(dirname "$f")")_$(basename "$f" .cc).o"
  objs+=("$o")
  if [ ! -f "$o" ] || [ "$f" -nt "$o" ]; then stale+=("$f=$o"); fi
done
if [ ${#stale[@]} -gt 0 ] || [ ! -x "$binary" ]; then
  echo "building $binary (${#stale[@]} files)"
  left=$((budget - (SECONDS - started) - 15))
  [ "$left" -lt 5 ] && left=5
  if [ ${#stale[@]} -gt 0 ] && ! printf '%s\n' "${stale[@]}" |
      timeout "$left" xargs -P "$(nproc 2>/dev/null || echo 2)" -I{} sh -c \
        'src="${1%%=*}"; obj="${1#*=}"; shift; exec "$@" -w -c "$src" -o "$obj"' _ {} \
        "$cxx" "${flags[@]}"; then
    if [ $((SECONDS - started)) -ge $((budget - 16)) ]; then
      echo "SKIP: building the fuzzer did not fit in ${budget} s; run $0 by hand once"
      exit 77
    fi
    echo "FAIL: could not build the fuzzer" >&2
    exit 1
  fi
  if ! "$cxx" -fsanitize=fuzzer,address,undefined "${objs[@]}" -lfmt -lpthread -o "$binary"; then
    echo "FAIL: could not link the fuzzer" >&2
    exit 1
  fi
fi

left=$((budget - (SECONDS - started) - 5))
[ "$left" -lt "$seconds" ] && seconds=$left
[ "$seconds" -lt 5 ] && seconds=5
seeds="$build/seeds"
corpus="$build/corpus"
mkdir -p "$seeds" "$corpus"
cp "$root"/tests/data/images/*.png "$root"/tests/data/images/*.jpg "$root"/tests/data/images/*.gif \
   "$root"/tests/data/images/*.bmp "$root"/tests/data/images/*.tga "$seeds"/ 2>/dev/null
cd "$build" || exit 2
# -malloc_limit_mb: an allocation beyond one image at the pixel limit is a bug.
"$binary" "$corpus" "$seeds" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -malloc_limit_mb=1024 -max_len=65536 -print_final_stats=1 2>&1 | tail -n 25
exit "${PIPESTATUS[0]}"
