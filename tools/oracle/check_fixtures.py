#!/usr/bin/python3
"""Check the oracle against the reference engine's fixture sets.

  /usr/bin/python3 tools/oracle/check_fixtures.py [FIXTURES_DIR] [--rel 1e-4]

FIXTURES_DIR defaults to /work/shared/fixtures; every subdirectory holding a
container/ is checked. Exit status 0 iff every check passes.
"""

import argparse
import json
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from waste_oracle import Container, Model  # noqa: E402


def rel_cmp(name, ref, got, rel, results):
    ref = np.asarray(ref, np.float64).ravel()
    got = np.asarray(got, np.float64).ravel()
    if ref.size != got.size:
        results.append((name, False, "size %d vs %d" % (ref.size, got.size)))
        return
    d = float(np.max(np.abs(ref - got)))
    m = float(np.max(np.abs(ref)))
    ok = d <= rel * m
    results.append((name, ok, "max|d| %.3g  max|ref| %.4g  rel %.2e" % (d, m, d / m if m else 0.0)))


def run(ct, ids, extra_greedy=0):
    md = Model(ct, warn=lambda m: print("  oracle: " + m, file=sys.stderr))
    T = len(ids)
    V, NL, H = ct.cfg.V, ct.cfg.NL, ct.cfg.H
    lo = np.zeros((T, V), np.float32)
    hid = np.zeros((T, NL, H), np.float32)
    for i, t in enumerate(ids):
        lo[i], hid[i] = md.step(t)
    nroutes = len(md.routes)
    greedy, glog = [], []
    cur = lo[-1]
    for k in range(extra_greedy):
        nid = int(np.argmax(cur))
        greedy.append(nid)
        glog.append(cur)
        if k + 1 < extra_greedy:
            cur, _ = md.step(nid)
    return lo, hid, md.routes[:nroutes], greedy, np.array(glog, np.float32), md.near_ties


def check_set(d, rel):
    results = []
    name = os.path.basename(os.path.normpath(d))
    ct = Container(os.path.join(d, "container"))
    V = ct.cfg.V
    ids = json.load(open(os.path.join(d, "prompt_ids.json")))
    gj = json.load(open(os.path.join(d, "greedy16.json")))
    ex = os.path.join(d, "extra")
    rd = lambda f: np.fromfile(os.path.join(ex, f) if not os.path.isabs(f) else f, dtype="<f4")
    t0 = time.time()
    lo, hid, routes, greedy, glog, ties = run(ct, ids, extra_greedy=16)
    t1 = time.time()
    rel_cmp("logits_seq_all [16][V]", rd("logits_seq_all.f32"), lo, rel, results)
    rel_cmp("logits_seq_last", rd("logits_seq_last.f32"), lo[-1], rel, results)
    rel_cmp("logits_last (ref chunked prefill)", np.fromfile(os.path.join(d, "logits_last.f32"), "<f4"),
            lo[-1], rel, results)
    rel_cmp("hidden_per_layer_seq [16][NL][H]", rd("hidden_per_layer_seq.f32"), hid, rel, results)
    # per-layer relative figures (for bisecting)
    ref_h = rd("hidden_per_layer_seq.f32").reshape(hid.shape)
    per_layer = []
    for L in range(hid.shape[1]):
        dd = np.max(np.abs(ref_h[:, L] - hid[:, L]))
        per_layer.append("L%d %.1e" % (L, dd / np.max(np.abs(ref_h[:, L]))))
    results.append(("hidden per-layer rel", True, ", ".join(per_layer)))
    ok_am = bool(np.all(np.argmax(lo, 1) == np.argmax(rd("logits_seq_all.f32").reshape(lo.shape), 1)))
    results.append(("argmax every prompt position", ok_am, ""))
    # routes
    ref_lines = [ln.split() for ln in open(os.path.join(ex, "route_seq.txt")) if ln.strip()]
    K = ct.cfg.K
    id_ok = len(ref_lines) == len(routes)
    wmax = 0.0
    for rl, (pos, L, rid, w) in zip(ref_lines, routes):
        rpos, rL = int(rl[0]), int(rl[1])
        rids = [int(v) for v in rl[2:2 + K]]
        rw = [float(v) for v in rl[2 + K:2 + 2 * K]]
        if (rpos, rL, rids) != (pos, L, list(rid)):
            id_ok = False
        wmax = max(wmax, max(abs(a - float(b)) for a, b in zip(rw, w)))
    results.append(("route_seq ids/order (%d lines)" % len(ref_lines), id_ok, ""))
    results.append(("route_seq weights (printed %.6g)", wmax < 2e-5, "max|dw| %.2e" % wmax))
    results.append(("router near-ties (gap < 1e-5)", True, "%d" % len(ties)))
    # greedy
    results.append(("greedy16", greedy == gj["greedy16"], str(greedy)))
    rel_cmp("greedy16_logits [16][V]", rd("greedy16_logits.f32"), glog, rel, results)
    # long prompt
    lp = json.load(open(os.path.join(ex, "long_prompt.json")))
    t2 = time.time()
    llo, _, _, lgreedy, _, lties = run(ct, lp["prompt_ids"], extra_greedy=16)
    t3 = time.time()
    rel_cmp("long_logits_seq_all [80][V]", rd("long_logits_seq_all.f32"), llo, rel, results)
    rel_cmp("long_logits_last (ref chunked prefill)", rd("long_logits_last.f32"), llo[-1], rel, results)
    results.append(("long greedy16", lgreedy == lp["greedy16"], str(lgreedy)))
    results.append(("long near-ties", True, "%d" % len(lties)))
    results.append(("time", True, "16-token prompt+15 greedy %.2fs; 80-token prompt+15 greedy %.2fs"
                    % (t1 - t0, t3 - t2)))
    ct.close()
    return name, V, results


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("fixtures", nargs="?", default="/work/shared/fixtures")
    ap.add_argument("--rel", type=float, default=1e-4)
    a = ap.parse_args(argv)
    sets = sorted(os.path.join(a.fixtures, s) for s in os.listdir(a.fixtures)
                  if os.path.isdir(os.path.join(a.fixtures, s, "container")))
    if not sets:
        print("no fixture sets under %s" % a.fixtures)
        return 2
    all_ok = True
    for s in sets:
        name, V, res = check_set(s, a.rel)
        print("== %s (vocab %d)" % (name, V))
        for (n, ok, info) in res:
            print("  %-4s %-40s %s" % ("ok" if ok else "FAIL", n, info))
            all_ok &= ok
    print("ALL OK" if all_ok else "SOME CHECKS FAILED")
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
