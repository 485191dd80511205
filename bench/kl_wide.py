#!/usr/bin/python3
"""KL to the float model of containers converted from a Kimi-Linear-WIDTH
test checkpoint (docs/CONVERT.md, "Kimi-Linear width"). A measurement, not
a test: about 5 minutes and 21 GB of memory per model seed at 64 experts
(the numpy oracle holds every expert it meets in float64).

  /usr/bin/python3 bench/kl_wide.py BUILD_DIR WORK_DIR [--seeds 5,11,23]
      [--experts 32] [--positions 64]
      [--variant 'NAME=CONVERT ARGS' ...]

Per model seed: `waste-gen --checkpoint --preset kimi-linear` at the real
widths (hidden 2304, expert 1024, dense MLP 9216, real vocabulary) with 3
layers (layer 0 KDA + dense MLP, layer 1 KDA + MoE, layer 2 MLA + MoE) and
`--experts` routed experts, bf16; the oracle's float forward from the
checkpoint over `--positions` ids (3 + 37 i) mod 1024; then for each
variant a conversion (`waste convert CKPT OUT --seed 3 --threads 2 ARGS`)
and the oracle on the container. Prints KL(float || converted) in nats with
its standard error over positions, top-1 agreement and the container's
bytes; the paired differences against the first variant at the end.
Default variants: `ours` (no arguments) and `ref` (--reference-recipe).
Finished conversions and float logits in WORK_DIR are reused.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def log_softmax(a):
    a = a.astype(np.float64)
    a -= a.max(1, keepdims=True)
    return a - np.log(np.exp(a).sum(1, keepdims=True))


def oracle(d, ids, out, checkpoint):
    cmd = [sys.executable, os.path.join(ROOT, "tools/oracle/oracle.py"), d, "--ids", " ".join(map(str, ids)),
           "--all-logits-out", out, "--quiet"] + (["--checkpoint"] if checkpoint else [])
    subprocess.run(cmd, check=True)


def container_bytes(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".bin"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("work")
    ap.add_argument("--seeds", default="5,11,23")
    ap.add_argument("--experts", type=int, default=32)
    ap.add_argument("--positions", type=int, default=64)
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME=ARGS: a conversion with these extra arguments (default: ours, ref)")
    a = ap.parse_args()
    variants = [("ours", []), ("ref", ["--reference-recipe"])]
    if a.variant:
        variants = []
        for v in a.variant:
            name, _, args = v.partition("=")
            variants.append((name, shlex.split(args)))
    ids = [(3 + 37 * i) % 1024 for i in range(a.positions)]
    os.makedirs(a.work, exist_ok=True)
    kl = {}
    for seed in [int(s) for s in a.seeds.split(",")]:
        ck = os.path.join(a.work, "ck%d-e%d" % (seed, a.experts))
        if not os.path.exists(os.path.join(ck, "config.json")):
            override = {"num_hidden_layers": 3, "num_experts": a.experts,
                        "linear_attn_config": {"kda_layers": [1, 2], "full_attn_layers": [3]}}
            subprocess.run([os.path.join(a.build, "tools/gen/waste-gen"), ck, "--checkpoint", "--preset",
                            "kimi-linear", "--seed", str(seed), "--dtype", "bf16", "--override",
                            json.dumps(override)], check=True, stdout=subprocess.DEVNULL)
        fpath = os.path.join(ck, "float-%d.f32" % a.positions)
        if not os.path.exists(fpath):
            oracle(ck, ids, fpath + ".tmp", True)
            os.replace(fpath + ".tmp", fpath)
        f = log_softmax(np.fromfile(fpath, np.float32).reshape(len(ids), -1))
        print("model seed %d (%d experts, %d positions)" % (seed, a.experts, len(ids)), flush=True)
        for name, args in variants:
            out = os.path.join(a.work, "c%d-e%d-%s" % (seed, a.experts, name))
            t0 = time.time()
            if not os.path.exists(os.path.join(out, "manifest.json")):
                subprocess.run([os.path.join(a.build, "waste"), "convert", ck, out, "--seed", "3", "--threads", "2"]
                               + args, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            secs = time.time() - t0
            qpath = os.path.join(a.work, "q.f32")
            oracle(out, ids, qpath, False)
            q = log_softmax(np.fromfile(qpath, np.float32).reshape(len(ids), -1))
            k = (np.exp(f) * (f - q)).sum(1)
            kl[(seed, name)] = k
            print("  %-10s KL %.4f (se %.4f)  top-1 %3.0f%%  %d bytes  convert %.0f s" % (
                name, k.mean(), k.std(ddof=1) / np.sqrt(len(k)), 100 * (f.argmax(1) == q.argmax(1)).mean(),
                container_bytes(out), secs), flush=True)
    seeds = sorted({s for s, _ in kl})
    base = variants[0][0]
    print("against %s (paired over positions; ratio of the means):" % base)
    for name, _ in variants[1:]:
        parts = []
        for s in seeds:
            d = kl[(s, base)] - kl[(s, name)]
            parts.append("seed %d: %s/%s %.3f (diff %+.4f ± %.4f)" % (
                s, base, name, kl[(s, base)].mean() / kl[(s, name)].mean(), d.mean(),
                d.std(ddof=1) / np.sqrt(len(d))))
        print("  " + name + ": " + "; ".join(parts))


if __name__ == "__main__":
    main()
