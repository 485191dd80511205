#!/usr/bin/env bash
# The issue #18 table's all-cached rows (docs/PERFORMANCE.md, "Round two"):
# decode after a 256-token prompt and prefill of 64, 256 and 1024 tokens on
# the full-size Kimi-Linear-width container with every expert cached, and
# decode / 64-token prefill on a 4-layer container at the same widths. Each
# command runs three repetitions in one process (the first reads the experts,
# the other two are warm) and is repeated ROUNDS times; the summary gives the
# warm repetitions' median and range. The cold-start rows are
# bench/budget_table_measure.sh's.
#   bench/warm_table_measure.sh FULL_MODEL_DIR FOUR_LAYER_MODEL_DIR OUT_DIR [ROUNDS]
# Needs ~19 GiB free for the full-size container's 18G budget.
set -euo pipefail
FULL=${1:?full-size Kimi-Linear-width container}
KL4=${2:?4-layer Kimi-Linear-width container}
OUT=${3:?output dir}
ROUNDS=${4:-2}
WASTE=${WASTE:-build/waste}
mkdir -p "$OUT"
ids() {  # the issue's fixed pseudo-random prompt ids (seed 18), $1 of them
  /usr/bin/python3 -c "import random; r=random.Random(18); print(' '.join(str(r.randrange(1000,160000)) for _ in range($1)))"
}
run() {  # name, model, budget, prompt tokens, generated tokens
  local name=$1 model=$2 budget=$3 n_prompt=$4 n_gen=$5 round=$6
  uptime >> "$OUT/load.txt"
  "$WASTE" bench "$model" --ids "$(ids "$n_prompt")" --budget "$budget" -n "$n_gen" -r 3 --json \
    > "$OUT/${name}_$round.json"
}
for round in $(seq 1 "$ROUNDS"); do
  run full_decode "$FULL" 18G 256 64 "$round"
  run full_pp64 "$FULL" 18G 64 1 "$round"
  run full_pp1024 "$FULL" 18G 1024 1 "$round"
  run kl4 "$KL4" 4G 64 64 "$round"
done
uptime >> "$OUT/load.txt"
/usr/bin/python3 - "$OUT" <<'PY'
import glob, json, os, statistics, sys
out = sys.argv[1]
def warm(name, test_prefix):
    xs = []
    for f in sorted(glob.glob(os.path.join(out, f"{name}_*.json"))):
        for row in json.load(open(f))["rows"]:
            if row["test"].startswith(test_prefix):
                xs += row["samples"][1:]  # the first repetition reads the experts
    return xs
def med(xs):
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}..{max(xs):.2f}), n={len(xs)}" if xs else "-"
print("| row | warm tok/s: median (range), samples |")
print("|---|---|")
print(f"| full size, decode after 256 prompt tokens | {med(warm('full_decode', 'tg'))} |")
print(f"| full size, 256-token prefill | {med(warm('full_decode', 'pp'))} |")
print(f"| full size, 64-token prefill | {med(warm('full_pp64', 'pp'))} |")
print(f"| full size, 1024-token prefill | {med(warm('full_pp1024', 'pp'))} |")
print(f"| 4-layer, decode after 64 prompt tokens | {med(warm('kl4', 'tg'))} |")
print(f"| 4-layer, 64-token prefill | {med(warm('kl4', 'pp'))} |")
PY
