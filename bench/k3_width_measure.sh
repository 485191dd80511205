#!/bin/bash
# The K3-width layer measurements of docs/PERFORMANCE.md ("K3-width layer"):
# two synthetic containers at Kimi K3's real widths, one with a dense KDA
# layer and one MoE MLA layer (896 experts, 12,406,784-byte records), the
# same with a MoE KDA layer, and one with the dense layer alone, so that
# their differences are one MoE layer of either kind.
#
#   bench/k3_width_measure.sh BUILD MODELS_DIR OUT [ROUTING_TRACE]
#
# BUILD: a release build tree (waste and tools/gen/waste-gen built).
# MODELS_DIR: where the containers go (about 31 GB; made once, reused).
# ROUTING_TRACE: JSON lines of routed expert ids; the MoE router biases are
# fitted to its popularity (optional; uniform routing without it).
# Peak RSS stays under 8.2 GiB (the largest budget is 8.5G). Every run is
# `waste bench --json` with WASTE_PROFILE=1 under /usr/bin/time -v; the load
# average before and after each run goes to OUT/NAME.load.
set -u
BUILD=${1:?build tree}
MODELS=${2:?models dir}
OUT=${3:?output dir}
TRACE=${4:-none}
mkdir -p "$OUT" "$MODELS"
# K3 widths (hidden 7168, 896 experts top-16, expert hidden 3584 x 3072,
# two shared experts, q LoRA 1536, KV LoRA 512, 96 MLA and 96 KDA heads of
# 128, vocabulary 163840). Two layers: AttnRes blocks of 2 (the config
# allows at most the layer count; K3 uses 12). The dense FFN width (18432)
# is not known for K3 and only affects the dense layer.
K3='"hidden_size":7168,"first_k_dense_replace":1,"intermediate_size":18432,
"moe_intermediate_size":3072,"num_experts":896,"num_experts_per_token":16,"num_shared_experts":2,
"routed_expert_hidden_size":3584,"num_attention_heads":96,"qk_nope_head_dim":128,
"qk_rope_head_dim":64,"v_head_dim":128,"kv_lora_rank":512,"q_lora_rank":1536,"vocab_size":163840'
KDA='"head_dim":128,"num_heads":96,"short_conv_kernel_size":4,"use_full_rank_gate":true,"gate_lower_bound":-5.0'
TWO="{$K3,\"num_hidden_layers\":2,\"attn_res_block_size\":2,\"linear_attn_config\":{$KDA,\"kda_layers\":[1],\"full_attn_layers\":[2]}}"
TWOK="{$K3,\"num_hidden_layers\":2,\"attn_res_block_size\":2,\"linear_attn_config\":{$KDA,\"kda_layers\":[1,2],\"full_attn_layers\":[]}}"
ONE="{$K3,\"num_hidden_layers\":1,\"attn_res_block_size\":1,\"linear_attn_config\":{$KDA,\"kda_layers\":[1],\"full_attn_layers\":[]}}"
W="$MODELS/k3w"
K="$MODELS/k3wk"
D="$MODELS/k3w1"
[ -f "$W/manifest.json" ] || "$BUILD/tools/gen/waste-gen" "$W" --preset k3-tiny --seed 1 --tokenizer \
  --trace "$TRACE" --override "$TWO" || exit 1
[ -f "$K/manifest.json" ] || "$BUILD/tools/gen/waste-gen" "$K" --preset k3-tiny --seed 1 --tokenizer \
  --trace "$TRACE" --override "$TWOK" || exit 1
[ -f "$D/manifest.json" ] || "$BUILD/tools/gen/waste-gen" "$D" --preset k3-tiny --seed 1 --tokenizer \
  --override "$ONE" || exit 1

# 64 prompt ids drawn once (seeded) so every run routes alike.
IDS=$(/usr/bin/python3 -c "import random; r=random.Random(18); print(' '.join(str(r.randrange(1000,150000)) for _ in range(64)))")
one() {  # one NAME MODEL ARGS...
  local name=$1 model=$2
  shift 2
  uptime > "$OUT/$name.load"
  WASTE_PROFILE=1 /usr/bin/time -v "$BUILD/waste" bench "$model" --json --ids "$IDS" "$@" \
    > "$OUT/$name.json" 2> "$OUT/$name.time"
  uptime >> "$OUT/$name.load"
}
# The hotlist for the warm runs: what the same prompt and 32 tokens use.
"$BUILD/waste" run "$W" --budget 8.5G --ids "$IDS" -n 32 --learn --usage "$OUT/u85.waste" -q \
  > /dev/null 2>&1
for r in 1 2 3; do
  one c85_cold_$r "$W" --budget 8.5G -n 32
  WASTE_WARM_WAIT=1 one c85_warm_$r "$W" --budget 8.5G -n 32 --usage "$OUT/u85.waste"
  one c5_cold_$r "$W" --budget 5G -n 32
  one c3_cold_$r "$W" --budget 3G -n 32
  one d1_$r "$D" --budget 8.5G -n 32
done
# Prefill alone (one token), to split the cumulative phase profile into
# prefill and decode: decode phase = (run with -n 32 - run with -n 1) / 31.
for r in 1 2 3; do
  WASTE_WARM_WAIT=1 one p85_warm_$r "$W" --budget 8.5G -n 1 --usage "$OUT/u85.waste"
  one pd1_$r "$D" --budget 8.5G -n 1
done
# The MoE KDA layer, warm, alternating with the MoE MLA layer and k3w1.
"$BUILD/waste" run "$K" --budget 8.5G --ids "$IDS" -n 32 --learn --usage "$OUT/uk85.waste" -q \
  > /dev/null 2>&1
for r in 1 2 3; do
  WASTE_WARM_WAIT=1 one k85_warm_$r "$K" --budget 8.5G -n 32 --usage "$OUT/uk85.waste"
  WASTE_WARM_WAIT=1 one c85_warm_$((r + 3)) "$W" --budget 8.5G -n 32 --usage "$OUT/u85.waste"
  WASTE_WARM_WAIT=1 one pk85_warm_$r "$K" --budget 8.5G -n 1 --usage "$OUT/uk85.waste"
  one d1_$((r + 3)) "$D" --budget 8.5G -n 32
done
# The same cold run with 4 KiB pages (the big-budget penalty, below).
for r in 1 2; do
  WASTE_HUGE_PAGES=0 one h85_cold_$r "$W" --budget 8.5G -n 32
done
"$BUILD/tools/diskbench/waste-diskbench" "$W" --threads 1,2 --depth 1,4 --seconds 3 > "$OUT/diskbench.txt" 2>&1
