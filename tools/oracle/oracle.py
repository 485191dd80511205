#!/usr/bin/python3
"""WASTE numpy oracle CLI.

  /usr/bin/python3 tools/oracle/oracle.py CONTAINER_DIR --ids "1 17 42" \
      [--logits-out F] [--all-logits-out F] [--hidden-out F] [--route-out F] \
      [--greedy N] [--greedy-logits-out F] [--vq4p-lut|--no-vq4p-lut] ...

Feeds the ids one at a time from position 0 (MODEL.md §2, §10).
"""

import argparse
import json
import os
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from waste_oracle import Checkpoint, Container, FormatError, Model  # noqa: E402


def parse_ids(s):
    s = s.strip()
    if s.startswith("["):
        return [int(v) for v in json.loads(s)]
    return [int(v) for v in s.replace(",", " ").split()]


def argmax_first(v):
    return int(np.argmax(v))  # numpy returns the first maximum => lowest id


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("container", help="container directory (or a checkpoint with --checkpoint)")
    ap.add_argument("--checkpoint", action="store_true",
                    help="the directory is a published safetensors checkpoint: run the float model")
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--ids", help='token ids: "1 17 42", "1,17,42" or a JSON list')
    g.add_argument("--ids-file", help="JSON file: a list of ids, or an object with prompt_ids")
    ap.add_argument("--logits-out", help="last position logits, raw f32 LE [V]")
    ap.add_argument("--all-logits-out", help="every position's logits, raw f32 LE [T][V]")
    ap.add_argument("--hidden-out", help="residual stream after each layer, raw f32 LE [T][NL][H]")
    ap.add_argument("--route-out", help="routing lines 'pos layer id0..idK-1 w0..wK-1'")
    ap.add_argument("--greedy", type=int, default=0, metavar="N",
                    help="print N greedy continuation ids (JSON list) on stdout")
    ap.add_argument("--greedy-logits-out", help="[N][V] f32: the logits each greedy id was argmax of")
    lg = ap.add_mutually_exclusive_group()
    lg.add_argument("--vq4p-lut", dest="vq4p_lut", action="store_true", default=None,
                    help="VQ4P: emulate the engine's int8 LUT (default ON for VQ4P containers)")
    lg.add_argument("--no-vq4p-lut", dest="vq4p_lut", action="store_false",
                    help="VQ4P: dense reconstruction instead of the int8 LUT")
    ap.add_argument("--lut-f32", action="store_true",
                    help="non-VQ4P: use the engine's f32 table order instead of dense reconstruction")
    ap.add_argument("--lut-fma", action="store_true",
                    help="build LUT tables with fused multiply-add rounding (SIMD builds)")
    ap.add_argument("--verify", action="store_true", help="check record CRC32s (fatal on mismatch)")
    ap.add_argument("--tie-gap", type=float, default=1e-5,
                    help="flag router top-K boundary gaps below this (stderr)")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)

    def warn(m):
        if not a.quiet:
            print("oracle: " + m, file=sys.stderr)

    if a.ids is not None:
        ids = parse_ids(a.ids)
    else:
        with open(a.ids_file) as f:
            d = json.load(f)
        ids = d["prompt_ids"] if isinstance(d, dict) else d
    if not ids:
        print("oracle: empty prompt", file=sys.stderr)
        return 2
    try:
        if a.checkpoint:
            ct = Checkpoint(a.container, warn=warn)
        else:
            ct = Container(a.container, verify_crc=a.verify, warn=warn)
        vq4p = ct.eq.IB == 6
        if vq4p:
            mode = "dense" if a.vq4p_lut is False else "lut-int8"
        else:
            if a.vq4p_lut:
                warn("--vq4p-lut ignored: container is not VQ4P")
            mode = "lut-f32" if a.lut_f32 else "dense"
        model = Model(ct, expert_mode=mode, lut_fma=a.lut_fma, warn=warn, tie_gap=a.tie_gap)
        V = ct.cfg.V
        for t in ids:
            if not (0 <= t < V):
                print("oracle: token id %d out of range [0, %d)" % (t, V), file=sys.stderr)
                return 2
        T = len(ids)
        all_logits = np.zeros((T, V), np.float32)
        hidden = np.zeros((T, ct.cfg.NL, ct.cfg.H), np.float32)
        for i, t in enumerate(ids):
            lo, hid = model.step(t)
            all_logits[i] = lo
            hidden[i] = hid
        n_prompt_routes = len(model.routes)
        greedy, glog = [], []
        if a.greedy > 0:
            cur = all_logits[-1]
            for k in range(a.greedy):
                nid = argmax_first(cur)
                greedy.append(nid)
                glog.append(cur)
                if k + 1 < a.greedy:
                    cur, _ = model.step(nid)
    except FormatError as e:
        print("oracle: format error: %s" % e, file=sys.stderr)
        return 3

    if a.logits_out:
        all_logits[-1].astype("<f4").tofile(a.logits_out)
    if a.all_logits_out:
        all_logits.astype("<f4").tofile(a.all_logits_out)
    if a.hidden_out:
        hidden.astype("<f4").tofile(a.hidden_out)
    if a.route_out:
        with open(a.route_out, "w") as f:
            for (pos, L, rid, w) in model.routes[:n_prompt_routes]:
                f.write("%d %d %s %s\n" % (pos, L, " ".join(str(i) for i in rid),
                                           " ".join("%.6g" % float(x) for x in w)))
    if a.greedy_logits_out and glog:
        np.array(glog, np.float32).astype("<f4").tofile(a.greedy_logits_out)
    for (pos, L, gap) in model.near_ties:
        warn("router near-tie at pos %d layer %d: top-K boundary gap %.3g" % (pos, L, gap))
    if a.greedy > 0:
        print(json.dumps(greedy))
    return 0


if __name__ == "__main__":
    sys.exit(main())
