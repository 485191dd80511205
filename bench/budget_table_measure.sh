#!/usr/bin/env bash
# The issue #18 table on the full-size Kimi-Linear-width container: decode and
# a 64-token prefill from a cold start at 20G, 4G and 2G (page cache dropped
# before every process, the configurations alternated), each process under
# /usr/bin/time for faults and CPU (docs/PERFORMANCE.md, "The full-size table").
#   bench/budget_table_measure.sh MODEL_DIR OUT_DIR [ROUNDS]
# Needs root for /proc/sys/vm/drop_caches (skipped with a note otherwise) and,
# at 20G, a machine with ~21 GiB free.
set -euo pipefail
M=${1:?model dir (the full-size Kimi-Linear-width container)}
OUT=${2:?output dir}
ROUNDS=${3:-3}
WASTE=${WASTE:-build/waste}
BUDGETS=${BUDGETS:-20G 4G 2G}
mkdir -p "$OUT"
# The issue's workload: 64 fixed pseudo-random prompt ids, 64 greedy tokens.
IDS=$(/usr/bin/python3 -c "import random; r=random.Random(18); print(' '.join(str(r.randrange(1000,160000)) for _ in range(64)))")
drop() {
  sync
  if ! echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then echo "note: page cache not dropped (not root)" >&2; fi
}
for round in $(seq 1 "$ROUNDS"); do
  for b in $BUDGETS; do
    drop
    uptime >> "$OUT/load.txt"
    /usr/bin/time -f '{"wall_s":%e,"user_s":%U,"sys_s":%S,"minor_faults":%R,"max_rss_kb":%M}' \
      -o "$OUT/time_${b}_$round.json" \
      "$WASTE" bench "$M" --ids "$IDS" --budget "$b" -n 64 --json > "$OUT/bench_${b}_$round.json"
  done
done
uptime >> "$OUT/load.txt"
/usr/bin/python3 - "$OUT" $BUDGETS <<'PY'
import json, statistics, sys, glob, os
out, budgets = sys.argv[1], sys.argv[2:]
def med(xs): return f"{statistics.median(xs):.2f} ({min(xs):.2f}..{max(xs):.2f})"
print("| budget | decode tok/s | 64-token prefill s | decode hit | decode MB/token | minor faults | sys s | peak RSS GB |")
print("|---|---|---|---|---|---|---|---|")
for b in budgets:
    runs = sorted(glob.glob(os.path.join(out, f"bench_{b}_*.json")))
    bs = [json.load(open(r)) for r in runs]
    ts = [json.load(open(r.replace("bench_", "time_"))) for r in runs]
    print(f"| {b} | {med([x['decode_tok_s'] for x in bs])} | {med([x['prefill_s'] for x in bs])} | "
          f"{med([x['decode_hit_rate'] for x in bs])} | {med([x['decode_bytes_per_token']/1e6 for x in bs])} | "
          f"{med([t['minor_faults']/1e3 for t in ts])}k | {med([t['sys_s'] for t in ts])} | "
          f"{med([x['peak_rss_bytes']/1e9 for x in bs])} |")
PY
