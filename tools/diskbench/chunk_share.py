#!/usr/bin/env python3
"""How prompt chunks share experts: from a routing trace, for each chunk size,
the share of (expert, token) pairs whose expert that many tokens of the chunk
chose, and what that means for the MoE step's expert time under a simple
cost model (per expert: a table apply per token, or one row decode plus a
cheaper per-token product when the expert has `--min` tokens or more).

  chunk_share.py TRACE.jsonl [--chunks 64,128,256] [--min 8]
                 [--apply 0.135] [--decode 0.6] [--per-token 0.027]

TRACE: one JSON object per token, {"layers": [[expert ids], ...]} (the format
of a routing trace and of `waste-gen --trace`). Costs are milliseconds for one
gate-sized matrix on one core (kernels_bench vq_apply8_vq3r_planes_chunk1_gate,
vq_matmul8_vq3r_*tok_gate); only their ratios matter.
"""
import argparse
import collections
import json


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--chunks", default="64,128,256")
    ap.add_argument("--min", type=int, default=8, help="fewest tokens that decode an expert's rows")
    ap.add_argument("--apply", type=float, default=0.135, help="one table apply, ms")
    ap.add_argument("--decode", type=float, default=0.6, help="decoding the rows, ms")
    ap.add_argument("--per-token", type=float, default=0.027, help="decoded rows times one token, ms")
    a = ap.parse_args()
    tokens = [json.loads(line)["layers"] for line in open(a.trace) if line.strip()]
    layers = len(tokens[0])
    print(f"{len(tokens)} tokens x {layers} MoE layers; decoded path from {a.min} tokens")
    print("chunk  mean tokens/expert  pairs in experts >= min  expert time vs tables alone")
    for chunk in (int(c) for c in a.chunks.split(",")):
        pairs = items = decoded_pairs = 0
        tables = mixed = 0.0
        for start in range(0, len(tokens) - chunk + 1, chunk):
            for layer in range(layers):
                count = collections.Counter(e for t in tokens[start:start + chunk] for e in t[layer])
                for n in count.values():
                    pairs += n
                    items += 1
                    tables += n * a.apply
                    if n >= a.min:
                        decoded_pairs += n
                        mixed += a.decode + n * a.per_token
                    else:
                        mixed += n * a.apply
        if pairs == 0:
            print(f"{chunk:5d}  (trace shorter than one chunk)")
            continue
        print(f"{chunk:5d}  {pairs / items:18.1f}  {100 * decoded_pairs / pairs:22.0f} %  {mixed / tables:27.2f}")


if __name__ == "__main__":
    main()
