#!/usr/bin/env bash
# Builds one fuzz target of tests/fuzz with clang (libFuzzer + ASan + UBSan)
# and runs it for a bounded time over a seed corpus made from the fixtures
# (or built in, for files the fixtures lack).
#   run_fuzz.sh [--target NAME] [--seconds N] [--budget N] [--build-dir DIR]
#               [--binary PATH] [--fixtures DIR]
# Targets: container (default; manifest, trunk index, record headers),
# rank_file (tokenizer.model), specials (specials.json), chat_template
# (chat.json), hotlist (usage.waste), session_state (session files),
# pretokenizer (pretokenizer.json: parse, compile, split), hf_tokenizer
# (tokenizer.json as waste convert reads it), image (the image decoder and
# stb_image, seeded with tests/data/images), safetensors (a checkpoint's
# safetensors header and index), http_request (a chat request body through
# validation, both renderers and the schema compiler), grammar (GBNF and
# JSON Schema compilers), reply (model output through the reply parsers).
# --budget caps build + run (default 55 s, for the 60 s ctest limit).
# --binary skips the build (a CMake build with -DWASTE_BUILD_FUZZ=ON makes
# one). Exit 0 = no finding, 77 = skipped (no clang, no libFuzzer, or for
# image no stb_image.h), other =
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
target=container
while [ $# -gt 0 ]; do
  case "$1" in
    --target) target=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --budget) budget=$2; shift 2 ;;
    --build-dir) build=$2; shift 2 ;;
    --binary) binary=$2; shift 2 ;;
    --fixtures) fixtures=$2; shift 2 ;;
    *) echo "run_fuzz.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
[ -n "$build" ] || build="$root/build-fuzz"
mkdir -p "$build" && build=$(cd "$build" && pwd) || exit 2  # absolute: the build steps change directory

# The platform shim and Status: what every target's sources call.
base_sources=("$root/src/base/status.cc" "$root/src/platform/posix.cc" "$root/src/platform/linux.cc"
              "$root/src/platform/cgroup.cc" "$root/src/platform/cpu_list.cc")
# The grammar compilers (GBNF parser, JSON Schema -> GBNF, rule prefixing).
grammar_sources=("$root/src/grammar/gbnf_parser.cc" "$root/src/grammar/grammar.cc"
                 "$root/src/grammar/json_schema.cc" "$root/src/grammar/json_schema_bounds.cc"
                 "$root/src/grammar/json_schema_pattern.cc" "$root/src/grammar/rule_prefix.cc")
extra_flags=()
case "$target" in
  container)
    target_sources=(
      "$here/container_fuzz.cc"
      "$root/src/format/format.cc" "$root/src/format/json_reader.cc" "$root/src/format/rope_config.cc"
      "$root/src/format/manifest.cc" "$root/src/container/tensor_list.cc" "$root/src/container/trunk_stats.cc"
      # The manifest's config section is read by the model families' parser.
      "$root/src/model/config_parse.cc" "$root/src/model/families.cc"
      # memplan.cc's PlanMemory needs the platform shim (never called here).
      "$root/src/engine/memplan.cc"
      "$root/src/vision/vision_plan.cc" "$root/src/vision/vision_config.cc") ;;
  rank_file|specials)
    target_sources=("$here/${target}_fuzz.cc" "$root/src/text/tokenizer_files.cc") ;;
  pretokenizer)
    target_sources=("$here/pretokenizer_fuzz.cc" "$root/src/text/tokenizer_files.cc"
                    "$root/src/text/pretokenizer.cc" "$root/src/text/utf8.cc") ;;
  hf_tokenizer)
    target_sources=("$here/hf_tokenizer_fuzz.cc" "$root/src/convert/hf_tokenizer.cc"
                    "$root/src/text/tokenizer_files.cc" "$root/src/text/pretokenizer.cc" "$root/src/text/utf8.cc") ;;
  chat_template)
    target_sources=("$here/chat_template_fuzz.cc" "$root/src/text/chat_template.cc") ;;
  hotlist)
    target_sources=("$here/hotlist_fuzz.cc" "$root/src/streaming/hotlist_file.cc") ;;
  session_state)
    target_sources=("$here/session_state_fuzz.cc" "$root/src/model/session_state.cc") ;;
  safetensors)
    target_sources=("$here/safetensors_fuzz.cc" "$root/src/convert/safetensors.cc") ;;
  grammar)
    target_sources=("$here/grammar_fuzz.cc" "${grammar_sources[@]}") ;;
  http_request)
    target_sources=("$here/http_request_fuzz.cc" "${grammar_sources[@]}"
                    "$root/server/json_text.cc" "$root/server/chat_request.cc" "$root/server/render_xtml.cc"
                    "$root/server/render_chatjson.cc" "$root/server/api_error.cc"
                    "$root/server/responses_request.cc" "$root/server/anthropic_request.cc"
                    "$root/src/text/chat_template.cc")
    extra_flags=(-I"$root/server") ;;
  reply)
    target_sources=("$here/reply_fuzz.cc" "$root/server/reply_parser.cc" "$root/server/chat_turn.cc"
                    "$root/server/json_text.cc" "$root/server/api_error.cc")
    extra_flags=(-I"$root/server") ;;
  image)
    target_sources=("$here/image_fuzz.cc" "$root/src/vision/image_decode.cc"
                    "$root/src/vision/decoder_guards.cc" "$root/src/vision/stb_image_impl.cc") ;;
  *) echo "run_fuzz.sh: unknown target $target" >&2; exit 2 ;;
esac
# Per-target compile flags and fuzzer options.
fuzz_options=()
if [ "$target" = image ]; then
  stb_flags=$(pkg-config --cflags stb 2>/dev/null)
  if [ -z "$stb_flags" ] && [ -f /usr/include/stb/stb_image.h ]; then stb_flags="-I/usr/include/stb"; fi
  if [ -z "$stb_flags" ]; then
    echo "SKIP: stb_image.h not found (install libstb-dev)"
    exit 77
  fi
  # shellcheck disable=SC2206  # pkg-config output is a word list
  extra_flags=($stb_flags -w)  # -w: stb's own warnings are not ours to fix
  # An allocation beyond one image at the pixel limit is a bug.
  fuzz_options=(-malloc_limit_mb=1024)
fi

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
  binary="$build/${target}_fuzz"
  sources=("${target_sources[@]}" "${base_sources[@]}")
  flags=(-std=c++20 -O1 -g -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined
         -fno-sanitize-recover=undefined -I"$root/include" -I"$root/src" "${extra_flags[@]}")
  mkdir -p "$build/obj"
  newest_header=$(ls -t "$root"/src/*/*.h "$root"/include/waste/*.h "$root"/server/*.h | head -n 1)
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
    if ! "$cxx" -fsanitize=fuzzer,address,undefined "${objs[@]}" -lfmt -lz -lpcre2-8 -lpthread \
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

# Seed corpus per target: fixture files where they exist, small built-in
# ones otherwise.
seeds="$build/seeds-$target"
corpus="$build/corpus-$target"
mkdir -p "$seeds" "$corpus"
dict=()
n=0
case "$target" in
  container)
    dict=(-dict="$here/manifest.dict")
    for m in "$fixtures"/*/container/manifest.json; do
      [ -f "$m" ] || continue
      n=$((n + 1))
      cp "$m" "$seeds/manifest-$n.json"
      bank=$(dirname "$m")/experts-L1.bin
      [ -f "$bank" ] && head -c 12288 "$bank" > "$seeds/record-$n.bin"
    done
    if [ $n -eq 0 ]; then
      echo '{"format_version":0,"config":{"num_hidden_layers":1,"hidden_size":8,"vocab_size":8,"num_attention_heads":1,"kv_lora_rank":8,"qk_nope_head_dim":8,"v_head_dim":8,"intermediate_size":8},"trunk":[]}' > "$seeds/minimal.json"
    fi ;;
  rank_file)
    for f in "$fixtures"/*/container/tokenizer.model; do
      [ -f "$f" ] && n=$((n + 1)) && head -c 4096 "$f" > "$seeds/ranks-$n"
    done
    printf 'IQ== 0\nIg== 1\nIyQ= 2\n\nYWJj 3\r\n' > "$seeds/builtin" ;;
  specials)
    for f in "$fixtures"/*/container/specials.json; do
      [ -f "$f" ] && n=$((n + 1)) && cp "$f" "$seeds/specials-$n.json"
    done
    printf '[{"id":300,"text":"[BOS]"},{"id":301,"text":"<|im_end|>"}]' > "$seeds/builtin.json" ;;
  pretokenizer)
    printf '{"splits": [{"pattern": "\\\\p{N}{1,3}", "behavior": "Isolated", "invert": false}, {"pattern": "\\\\s+(?!\\\\S)|\\\\s+", "behavior": "MergedWithNext", "invert": true}], "bos_id": 0}' \
      > "$seeds/builtin.json" ;;
  hf_tokenizer)
    cp "$root/tests/data/deepseek_tokenizer.json" "$seeds/deepseek.json" ;;
  chat_template)
    printf '{"system":["<|sys|>","<|end|>"],"user":["<|user|>","<|end|>"],"assistant":["<|asst|>","<|end|>"],"open":"<|asst|>"}' \
      > "$seeds/chat.json" ;;
  hotlist)
    # "WUSG", version 1, 7 tokens, two entries.
    printf 'WUSG\001\000\000\000\007\000\000\000\000\000\000\000\001\000\003\000\011\000\000\000\002\000\000\000\000\000\000\000\002\000\001\000\004\000\000\000\001\000\000\000\000\000\000\000' \
      > "$seeds/usage.waste" ;;
  session_state)
    # A valid empty state for the target's geometry, made by the target's
    # own shape: header, 3 KDA layers of 2*4*4 + 3*8*3 floats, MLA nkv 0,
    # the residual (16 floats).
    {
      printf 'WDAS\001\000\000\000'
      for v in 4 16 2 4 4 2 4 2 4 0 0 0 0 0; do printf "\\$(printf '%03o' "$v")\000\000\000"; done
      head -c $((3 * (32 + 72) * 4)) /dev/zero
      head -c $((4 + 16 * 4)) /dev/zero
    } > "$seeds/empty.state" ;;
  safetensors)
    # A two-tensor file: header length, header, 12 data bytes; and an index.
    h='{"__metadata__":{"format":"pt"},"a":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}'
    { printf "\\$(printf '%03o' ${#h})\000\000\000\000\000\000\000"; printf '%s' "$h"; head -c 12 /dev/zero; } > "$seeds/two.safetensors"
    printf '{"metadata":{"total_size":12},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}' \
      > "$seeds/index.json" ;;
  grammar)
    printf 'root ::= "{" ws item ("," ws item)* "}"\nitem ::= [a-z]+ | "\\u00e9" | [^"\\\\]{1,3}\nws ::= [ \\t\\n]*\n' > "$seeds/gbnf"
    printf '{"type":"object","properties":{"a":{"type":"integer","minimum":0},"b":{"type":"array","items":{"enum":["x",1,null]},"maxItems":3},"c":{"$ref":"#/$defs/s"}},"required":["a"],"$defs":{"s":{"type":"string","format":"date"}}}' > "$seeds/schema.json"
    printf '{"type":"object","properties":{"p":{"type":"string","pattern":"^(?:[A-Z]{2}|x\\\\d+)-[^\\\\s\\\"]{1,3}(a|b)*?$"},"n":{"type":"number","exclusiveMinimum":-2.5,"maximum":1e3},"i":{"type":"integer","minimum":-70,"exclusiveMaximum":12345}}}' > "$seeds/bounds.json" ;;
  http_request)
    printf '{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"hi"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\\"x\\":1}"}}]},{"role":"tool","tool_call_id":"c1","content":"2"}],"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}],"tool_choice":"auto","temperature":0.5,"top_p":0.9,"max_tokens":16,"stop":["\\n"],"stream":true,"stream_options":{"include_usage":true},"reasoning_effort":"high"}' > "$seeds/chat.json"
    printf '{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}}}}' > "$seeds/schema.json" ;;
  reply)
    # <think>why</think>ok, then a Kimi call; an XTML think/response pair.
    printf '\x40\x07<think>\x40\x03why\x40\x08</think>\x40\x02ok\x0a\x0e\x40\x0dfunctions.f:0\x10\x40\x07{"a":1}\x12\x0c\x08' > "$seeds/kimi"
    printf '\x40\x03abc\x04\x40\x05think\x06\x02\x40\x08response\x06\x40\x02hi\x00' > "$seeds/xtml" ;;
  image)
    for f in "$root"/tests/data/images/*; do
      case "$f" in *.png|*.jpg|*.gif|*.bmp|*.tga) cp "$f" "$seeds/" ;; esac
    done ;;
esac

cd "$build" || exit 2
# libFuzzer's own exit code for a finding is 77, which ctest reads as SKIP:
# -error_exitcode=1 and -timeout_exitcode=1 make every finding a failure.
"$binary" "$corpus" "$seeds" "${dict[@]}" "${fuzz_options[@]}" -max_total_time="$seconds" \
  -timeout=10 -rss_limit_mb=2048 -max_len=65536 -print_final_stats=1 \
  -error_exitcode=1 -timeout_exitcode=1 2>&1 | tail -n 25
exit "${PIPESTATUS[0]}"
