#!/usr/bin/python3
"""How much of a converted tiny model's KL is the Q4G trunk's, and whether
other data-free Q4G roundings would lower it (docs/CONVERT.md, "Q4G
trunk rounding"). A measurement, not a test.

  /usr/bin/python3 bench/trunk_q4g_kl.py BUILD_DIR WORK_DIR [--seeds 5,11,23,7,42]

For each model seed: generates the e2e test's checkpoint (waste-gen tiny,
32 experts, intermediate 512, vocab 1024, bf16), converts it with the
default recipe without the residual rotation (--seed 3, T = 65 536,
--no-rotate: the candidates rewrite matrices from the checkpoint's own
basis, as they were measured before the rotation existed), and measures KL(float || quantised)
over 128 positions, ids (3 + 37 i) mod 1024, with the numpy oracle:

* trunk only (experts float, the checkpoint run by the oracle with the Q4G
  matrices replaced by their decoded values): each Q4G matrix alone, and
  all of them;
* full pipeline: the converted container with the Q4G matrices rewritten in
  place (same format, same bytes) by each candidate rounding.

The rounding below re-implements src/convert/trunk_quant.cc in numpy (the
codes agree with the C++ except for float-summation near-ties, about one
group in 500). Candidates: `ls4` least-squares scale refinement (4 rounds,
kept when the group error falls), `fine` 101 clip candidates down to 40%
with both ends of the code range tried, + ls4, `w_proxy` group error
weighted per input column (gate/up: the square of post_attention_layernorm's
weight; down: E[silu(g)^2] E[u^2] for Gaussian inputs, from gate's and up's
row norms), `unbiased` the scale rescaled so the decoded group's projection
on the original equals it (no shrinkage); and, for scale, `max (reference)`
the reference converter's max scaling.

--extra (experts float) adds: the shipped error scaled by 0.25 ... 1.25 (how
the KL grows with the error), column weights from the inputs' measured mean
squares, and GPTQ-style rounding (shipped scales, codes column by column with
error feedback) with the inputs' second moments measured on the same
positions, on 512 other positions, or (down_proj only) from Gaussian inputs.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "oracle"))
from waste_oracle import Checkpoint, Model  # noqa: E402

G = 128
IDS = [(3 + 37 * i) % 1024 for i in range(128)]
MLP = ["model.layers.0.mlp.%s_proj.weight" % k for k in ("gate", "up", "down")]


def f16(x):
    return np.asarray(x, np.float32).astype(np.float16).astype(np.float32)


def codes(x, s):
    inv = np.where(s > 0, 1.0 / np.where(s > 0, s, 1), 0).astype(np.float32)
    return np.clip(np.rint(x * inv), -8, 7)


def groups(W, w):
    r, c = W.shape
    X = W.reshape(-1, G).astype(np.float32)
    wg = np.ones_like(X) if w is None else np.tile(np.asarray(w, np.float32).reshape(c // G, G), (r, 1))
    return X, wg


def werr(X, s, wg):
    return (wg * (X - codes(X, s[:, None]) * s[:, None]) ** 2).sum(1)


def q4g(W, w=None, steps=20, lowest=0.70, ls=0, both=False, unbiased=False):
    """Codes [rows, cols] and f16 scales [rows * cols / 128] of one matrix."""
    X, wg = groups(W, w)
    amax, vmax, vmin = np.abs(X).max(1), X.max(1), X.min(1)
    tops = [np.full_like(amax, 7.0), np.full_like(amax, 8.0)] if both else [np.where(-vmin > vmax, 8.0, 7.0)]
    best_s = f16(amax / tops[0])
    best_e = werr(X, best_s, wg)
    for top in tops:
        for k in range(steps + 1):
            s = f16(amax * (1 - (1 - lowest) * k / steps) / top)
            e = werr(X, s, wg)
            b = e < best_e
            best_e, best_s = np.where(b, e, best_e), np.where(b, s, best_s)
    s = best_s
    for _ in range(ls):
        q = codes(X, s[:, None])
        num, den = (wg * X * q).sum(1), (wg * q * q).sum(1)
        s2 = f16(np.where(den > 0, num / np.where(den > 0, den, 1), s))
        s = np.where(werr(X, s2, wg) < werr(X, s, wg), s2, s)
    q = codes(X, s[:, None])
    if unbiased:
        xh = q * s[:, None]
        num, den = (X * X).sum(1), (X * xh).sum(1)
        s = f16(np.where(den > 0, s * num / np.where(den > 0, den, 1), s))
    return q.astype(np.int8).reshape(W.shape), s


def q4g_max(W):
    """The reference's max scaling: codes from the f32 scale max|x| / 7."""
    X = W.reshape(-1, G).astype(np.float32)
    s32 = np.maximum(np.abs(X).max(1), np.float32(1e-8)) / np.float32(7)
    return codes(X, s32[:, None]).astype(np.int8).reshape(W.shape), f16(s32)


def decoded(q, s):
    return (q.reshape(-1, G).astype(np.float32) * s[:, None]).reshape(q.shape)


def silu2(var):
    """E[silu(g)^2] for g ~ N(0, var), by quadrature."""
    z = np.linspace(-8, 8, 401)
    p = np.exp(-z * z / 2)
    p /= p.sum()
    g = np.sqrt(var)[:, None] * z[None, :]
    return ((g / (1 + np.exp(-g))) ** 2 * p).sum(1)


def candidates(W, gamma2):
    gate, up, down = MLP
    hp = silu2((W[gate] ** 2 * gamma2).sum(1)) * (W[up] ** 2 * gamma2).sum(1)
    return {
        "shipped": {n: q4g(W[n]) for n in MLP},
        "max (reference)": {n: q4g_max(W[n]) for n in MLP},
        "ls4": {n: q4g(W[n], ls=4) for n in MLP},
        "fine": {n: q4g(W[n], steps=100, lowest=0.4, both=True, ls=4) for n in MLP},
        "w_proxy": {gate: q4g(W[gate], gamma2), up: q4g(W[up], gamma2), down: q4g(W[down], hp)},
        "unbiased": {n: q4g(W[n], unbiased=True) for n in MLP},
    }


def gptq(W, H, s, damp=0.01):
    """Codes chosen column by column with GPTQ's error feedback under the
    input second-moment matrix H, the group scales s fixed (the shipped ones)."""
    r, c = W.shape
    S = np.repeat(s.reshape(r, c // G), G, axis=1)
    H = H + damp * np.mean(np.diag(H)) * np.eye(c)
    U = np.linalg.cholesky(np.linalg.inv(H)).T
    Wr = W.astype(np.float64).copy()
    q = np.zeros((r, c), np.int8)
    for j in range(c):
        q[:, j] = np.clip(np.rint(Wr[:, j] / S[:, j]), -8, 7)
        err = (Wr[:, j] - q[:, j] * S[:, j]) / U[j, j]
        Wr[:, j + 1:] -= np.outer(err, U[j, j + 1:])
    return q, s


def log_softmax(a):
    a = a.astype(np.float64)
    a -= a.max(1, keepdims=True)
    return a - np.log(np.exp(a).sum(1, keepdims=True))


def kl_rows(f, q):
    return (np.exp(f) * (f - q)).sum(1)


class TrunkOnly:
    """The float model, with chosen matrices swapped for decoded Q4G."""

    def __init__(self, ck):
        self.ct = Checkpoint(ck, warn=lambda m: None)
        self.m = Model(self.ct, expert_mode="dense", warn=lambda m: None)
        self.W = {n: self.ct.tensor(n).astype(np.float32) for n in MLP}
        self.orig = {n: self.m.M(n, *self.W[n].shape).copy() for n in MLP}
        self.f = log_softmax(self.run({}))

    def run(self, swap):
        for n in MLP:
            self.m._w64[n] = np.asarray(swap[n], np.float64) if n in swap else self.orig[n]
        self.m.reset()
        return np.array([self.m.step(t)[0] for t in IDS])

    def second_moments(self, ids):
        """E[x x^T] of the MLP's input and of down_proj's input over `ids` (float model)."""
        m, orig, xs, hs = self.m, self.m.mlp, [], []

        def mlp(pfx, width, x):
            if pfx == "model.layers.0.mlp.":
                g = m.mv(pfx + "gate_proj.weight", width, m.c.H, x)
                u = m.mv(pfx + "up_proj.weight", width, m.c.H, x)
                xs.append(np.asarray(x, np.float64))
                hs.append(np.asarray(m.act(g, u), np.float64))
            return orig(pfx, width, x)

        for n in MLP:
            m._w64[n] = self.orig[n]
        m.mlp = mlp
        try:
            m.reset()
            for t in ids:
                m.step(t)
        finally:
            m.mlp = orig
        xs, hs = np.array(xs), np.array(hs)
        return xs.T @ xs / len(xs), hs.T @ hs / len(hs)

    def kl(self, swap):
        return kl_rows(self.f, log_softmax(self.run(swap)))


def patch(cdir, name, q, s):
    m = json.load(open(os.path.join(cdir, "manifest.json")))
    e = next(t for t in m["trunk"] if t["name"] == name)
    assert e["fmt"] == 3, name
    r, c = q.shape
    u = (q.astype(np.int16) + 8).astype(np.uint8).reshape(r, c // 2, 2)
    with open(os.path.join(cdir, "trunk.bin"), "r+b") as f:
        f.seek(e["off"])
        f.write((u[:, :, 0] | (u[:, :, 1] << 4)).astype(np.uint8).tobytes())
        f.seek(e["scale_off"])
        f.write(s.astype("<f2").tobytes())


def oracle_logits(d, checkpoint, out):
    cmd = [sys.executable, os.path.join(ROOT, "tools/oracle/oracle.py"), d, "--ids", " ".join(map(str, IDS)),
           "--all-logits-out", out, "--quiet"] + (["--checkpoint"] if checkpoint else [])
    subprocess.run(cmd, check=True)
    return log_softmax(np.fromfile(out, np.float32).reshape(len(IDS), -1))


def summary(title, res, seeds, base):
    print(title)
    for vn in res:
        d = np.array([res[vn][s].mean() - res[base][s].mean() for s in seeds])
        se = [(res[vn][s] - res[base][s]).std(ddof=1) / np.sqrt(len(IDS)) for s in seeds]
        print("  %-16s mean %.4f  vs %s %+.4f (se over seeds %.4f, lower on %d/%d)  per seed: %s" % (
            vn, np.mean([res[vn][s].mean() for s in seeds]), base, d.mean(),
            d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else 0, (d < 0).sum(), len(d),
            " ".join("%.4f(%+.4f±%.4f)" % (res[vn][s].mean(), a, b) for s, a, b in zip(seeds, d, se))))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("build")
    ap.add_argument("work")
    ap.add_argument("--seeds", default="5,11,23,7,42")
    ap.add_argument("--extra", action="store_true",
                    help="also: KL against the error's amplitude, and GPTQ rounding with input "
                         "second moments from the measured positions, other positions, or Gaussian inputs")
    a = ap.parse_args()
    seeds = [int(s) for s in a.seeds.split(",")]
    os.makedirs(a.work, exist_ok=True)
    attr, trunk, full, extra = {}, {}, {}, {}
    for seed in seeds:
        ck = os.path.join(a.work, "ck%d" % seed)
        out = os.path.join(a.work, "out%d" % seed)
        if not os.path.exists(os.path.join(ck, "config.json")):
            subprocess.run([os.path.join(a.build, "tools/gen/waste-gen"), ck, "--checkpoint", "--preset", "tiny",
                            "--seed", str(seed), "--dtype", "bf16", "--vocab", "1024", "--override",
                            '{"num_experts":32,"intermediate_size":512}'], check=True, capture_output=True)
        if not os.path.exists(os.path.join(out, "manifest.json")):
            subprocess.run([os.path.join(a.build, "waste"), "convert", ck, out, "--seed", "3", "--threads", "2",
                            "--train-vectors", "65536", "--no-rotate"], check=True, capture_output=True)
        t = TrunkOnly(ck)
        gamma2 = t.ct.tensor("model.layers.0.post_attention_layernorm.weight").reshape(-1).astype(np.float64) ** 2
        cands = candidates(t.W, gamma2)
        shipped = {n: decoded(*cands["shipped"][n]) for n in MLP}
        attr.setdefault("none", {})[seed] = np.zeros(len(IDS))
        for n in MLP:
            attr.setdefault("only " + n.split(".")[-2], {})[seed] = t.kl({n: shipped[n]})
        attr.setdefault("all three", {})[seed] = t.kl(shipped)
        for vn, c in cands.items():
            trunk.setdefault(vn, {})[seed] = t.kl({n: decoded(*c[n]) for n in MLP})
        if a.extra:
            for amp in (0.25, 0.5, 0.75, 1.25):
                extra.setdefault("error x %.2f" % amp, {})[seed] = t.kl(
                    {n: t.W[n] + amp * (shipped[n] - t.W[n]) for n in MLP})
            gate, up, down = MLP
            s_of = {n: cands["shipped"][n][1] for n in MLP}

            def with_gptq(hx, hh, only_down=False):
                sw = dict(shipped)
                for n, h in ((gate, hx), (up, hx), (down, hh)):
                    if h is not None and (n == down or not only_down):
                        sw[n] = decoded(*gptq(t.W[n], h, s_of[n]))
                return sw

            extra.setdefault("shipped", {})[seed] = trunk["shipped"][seed]
            hx, hh = t.second_moments(IDS)
            extra.setdefault("weights = measured E[x^2]", {})[seed] = t.kl({
                gate: decoded(*q4g(t.W[gate], np.diag(hx))), up: decoded(*q4g(t.W[up], np.diag(hx))),
                down: decoded(*q4g(t.W[down], np.diag(hh)))})
            extra.setdefault("gptq, H from the measured positions", {})[seed] = t.kl(with_gptq(hx, hh))
            hx, hh = t.second_moments([(1007 + 53 * i) % 1024 for i in range(512)])
            extra.setdefault("gptq, H from 512 other positions", {})[seed] = t.kl(with_gptq(hx, hh))
            rng = np.random.default_rng(0)
            x = rng.standard_normal((8192, t.W[gate].shape[1])) * np.sqrt(gamma2)
            g, u = x @ t.W[gate].T.astype(np.float64), x @ t.W[up].T.astype(np.float64)
            h = g / (1 + np.exp(-g)) * u
            extra.setdefault("gptq down, H from Gaussian inputs", {})[seed] = t.kl(
                with_gptq(None, h.T @ h / len(h), only_down=True))
        f = oracle_logits(ck, True, os.path.join(a.work, "f.f32"))
        work = os.path.join(a.work, "patched")
        shutil.rmtree(work, ignore_errors=True)
        shutil.copytree(out, work)
        full.setdefault("as converted", {})[seed] = kl_rows(f, oracle_logits(out, False, os.path.join(a.work, "q.f32")))
        for vn, c in cands.items():
            for n in MLP:
                patch(work, n, *c[n])
            full.setdefault(vn, {})[seed] = kl_rows(f, oracle_logits(work, False, os.path.join(a.work, "q.f32")))
        print("seed %d done" % seed, flush=True)
    summary("trunk only (experts float): which Q4G matrix carries the KL", attr, seeds, "none")
    summary("trunk only (experts float): candidate roundings", trunk, seeds, "shipped")
    summary("full pipeline (converted container, Q4G matrices rewritten)", full, seeds, "shipped")
    if a.extra:
        summary("trunk only: error amplitude and GPTQ", extra, seeds, "shipped")


if __name__ == "__main__":
    main()
