#!/usr/bin/env bash
# Small budgets against Belady (issue #18 goal 4): the engine's bytes per
# decode token at the kl6 budgets that hold the same share of the experts as
# 2G and 4G do on the full-size Kimi-Linear container, under the default
# policy (reuse-odds) and the old LFRU, and the offline bounds from the same
# engine trace and from a real routing trace (docs/PERFORMANCE.md, "Small
# budgets against Belady").
#   bench/small_budget_measure.sh MODEL_DIR OUT_DIR [ROUTING.jsonl]
set -euo pipefail
M=${1:?model dir (a 6-layer Kimi-Linear-width container)}
OUT=${2:?output dir}
ROUTING=${3:-}
WASTE=${WASTE:-build/waste}
SIM="/usr/bin/python3 tools/diskbench/cache_sim.py"
mkdir -p "$OUT"
# 64 fixed pseudo-random prompt ids (seed 18).
IDS=$(/usr/bin/python3 -c "import random; r=random.Random(18); print(' '.join(str(r.randrange(1000,160000)) for _ in range(64)))")
# 869M -> 59 slots (4.6 % of 1,280 records, as 307 of 6,656 at 2G);
# 1264M -> 214 slots (16.7 %, as 1,112 at 4G); 4G holds every record.
for round in 1 2; do
  for b in 869M 1264M; do
    for pol in reuse-odds lfru; do
      trace="$OUT/trace_${pol}_$b.txt"
      rm -f "$trace"
      WASTE_CACHE_POLICY=$pol WASTE_CACHE_TRACE=$trace \
        "$WASTE" bench "$M" --ids "$IDS" --budget $b -n 128 --json > "$OUT/bench_${pol}_${b}_$round.json"
    done
  done
  "$WASTE" bench "$M" --ids "$IDS" --budget 4G -n 128 --json > "$OUT/bench_all_4G_$round.json"
done
uptime > "$OUT/load.txt"
for b in 869M 1264M; do
  s=59; [ $b = 1264M ] && s=214
  $SIM "$OUT/trace_reuse-odds_$b.txt" --slots $s --lookahead 0,6 --policy opt,lfru,reuse-odds > "$OUT/sim_$b.txt"
  $SIM "$OUT/trace_reuse-odds_$b.txt" --slots $s --lookahead 6 --policy reuse-odds --gate 0.7 >> "$OUT/sim_$b.txt"
done
if [ -n "$ROUTING" ]; then
  $SIM "$ROUTING" --slots 307,1112 --lookahead 0 --policy lfru,lru,lfu-history,reuse-odds,opt > "$OUT/sim_routing.txt"
fi
for f in "$OUT"/bench_*.json; do
  /usr/bin/python3 -c "
import json, sys
j = json.load(open(sys.argv[1]))
print(sys.argv[1].split('/')[-1], j['cache_policy'], j['cache_slots'], 'decode hit %.1f%%' % (100 * j['decode_hit_rate']),
      'decode MB/token %.1f' % (j['decode_bytes_per_token'] / 1e6), 'spec %d used %d' % (j['spec_reads'], j['spec_used']),
      'decode tok/s %.2f' % j['decode_tok_s'], 'read wait %.2f s' % j['decode_read_wait_s'])" "$f"
done
