#!/bin/bash
# Before/after measurements of docs/PERFORMANCE.md ("Second session"):
# engine_bench decode and prefill (alternating two builds), the ratio runs
# against WASTE_BACKEND=cpu, and `waste bench` at 4G, 2G and all cached
# (warmed from a hotlist learned on the bench prompt). Run it with nothing
# else on the machine; it writes its logs into OUT and a timeline.txt.
#
#   bench/ab_measure.sh MODEL AFTER_BUILD BEFORE_BUILD OUT
#
# AFTER_BUILD / BEFORE_BUILD: release build trees configured with
# -DWASTE_BUILD_BENCH=ON (bench/engine_bench and waste built), e.g. this
# tree's build-perf and a `git worktree` of the commit to compare with.
set -u
M=${1:?model}
A=${2:?after build}
B=${3:?before build}
OUT=${4:?output dir}
mkdir -p "$OUT"
cd "$OUT" || exit 1
log() { echo "$(date +%T) load $(cut -d' ' -f1 /proc/loadavg) $*" >> timeline.txt; }
for i in 1 2; do
  log "decode before $i"; $B/bench/engine_bench $M --budget 12G --prompt-tokens 4 -n 32 --reps 3 --no-cpu > before_decode_$i.log 2>&1
  log "decode after $i";  $A/bench/engine_bench $M --budget 12G --prompt-tokens 4 -n 32 --reps 3 --no-cpu > after_decode_$i.log 2>&1
done
log "decode ratio run"; $A/bench/engine_bench $M --budget 12G --prompt-tokens 4 -n 16 --reps 3 --cpu-reps 1 > after_decode_cpu.log 2>&1
for i in 1 2; do
  log "prefill before $i"; $B/bench/engine_bench $M --budget 16G --prompt-tokens 64 -n 2 --reps 3 --no-cpu > before_prefill_$i.log 2>&1
  log "prefill after $i";  $A/bench/engine_bench $M --budget 16G --prompt-tokens 64 -n 2 --reps 3 --no-cpu > after_prefill_$i.log 2>&1
done
log "prefill ratio run"; $A/bench/engine_bench $M --budget 16G --prompt-tokens 64 -n 2 --reps 2 --cpu-reps 1 > after_prefill_cpu.log 2>&1
for b in 4G 2G; do
  for i in 1 2; do
    log "bench $b before $i"; $B/waste bench $M --budget $b -n 64 --json > before_bench_${b}_$i.json 2> before_bench_${b}_$i.err
    log "bench $b after $i";  $A/waste bench $M --budget $b -n 64 --json > after_bench_${b}_$i.json 2> after_bench_${b}_$i.err
  done
done
IDS=$($A/waste tokenize $M "Write a C function that parses a JSON array of integers and explain its edge cases.")
echo "$IDS" > ids.txt
rm -f u14.waste
log "learn 14G"; $A/waste run $M --budget 14G --ids "$IDS" -n 64 --learn --usage "$OUT/u14.waste" > learn.out 2>&1
for i in 1 2; do
  log "bench 14G warmed after $i"; WASTE_WARM_WAIT=1 $A/waste bench $M --budget 14G --ids "$IDS" --usage "$OUT/u14.waste" -n 64 --json > after_bench_14G_$i.json 2> after_bench_14G_$i.err
  log "bench 14G warmed before $i"; WASTE_WARM_WAIT=1 $B/waste bench $M --budget 14G --ids "$IDS" --usage "$OUT/u14.waste" -n 64 --json > before_bench_14G_$i.json 2> before_bench_14G_$i.err
done
log done
