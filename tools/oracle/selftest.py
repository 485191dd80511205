#!/usr/bin/python3
"""Self-tests for the oracle beyond what the public fixtures exercise.

  /usr/bin/python3 tools/oracle/selftest.py [FIXTURE_CONTAINER]

FIXTURE_CONTAINER defaults to /work/shared/fixtures/warp-tiny/container.
The container is copied to temp dirs and transformed (re-encoded trunk
tensors, VQ2R / 4x64 / VQ4P banks, odd expert widths, feature switches whose
effect is known in closed form), and the oracle's results are compared.
Exit status 0 iff every test passes.

Independent evidence: test `worked_example` checks decoded values against
the byte-level worked example of FORMAT.md §12; `yarn_sanity` against the
MODEL.md §4.3 sanity values. The other tests are equivalences (two
encodings of the same weights, or a feature set to a value where its effect
is known) and refusals.
"""

import json
import math
import os
import shutil
import sys
import tempfile
import zlib

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from waste_oracle import Container, FormatError, Model  # noqa: E402
from waste_oracle.checkpoint import int4_dequantize  # noqa: E402
from waste_oracle.container import f16_exact, f16_flush  # noqa: E402
from waste_oracle.forward import rope_omegas, rotate_pairs  # noqa: E402

PROMPT = [1, 17, 42, 99, 128, 7, 250, 3, 64, 11, 200, 5, 77, 190, 33, 2]
RESULTS = []


def report(name, ok, info=""):
    RESULTS.append(ok)
    print("  %-4s %-52s %s" % ("ok" if ok else "FAIL", name, info))


def logits_of(path, ids=PROMPT, mode=None, hidden=False):
    ct = Container(path)
    md = Model(ct, expert_mode=mode, warn=lambda m: None)
    out, hid = [], []
    for t in ids:
        lo, h = md.step(t)
        out.append(lo)
        hid.append(h)
    ct.close()
    if hidden:
        return np.array(out), np.array(hid)
    return np.array(out)


def rel(a, b):
    a = np.asarray(a, np.float64)
    b = np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(a)))


# ---------------------------------------------------------------------------
# tiny writer helpers (used only to transform a copy of the fixture)

class Work:
    def __init__(self, src, tmp, name):
        self.dir = os.path.join(tmp, name)
        shutil.copytree(src, self.dir)
        self.m = json.load(open(os.path.join(self.dir, "manifest.json")))

    def save(self):
        with open(os.path.join(self.dir, "manifest.json"), "w") as f:
            json.dump(self.m, f, indent=1)

    def entry(self, name):
        for e in self.m["trunk"]:
            if e["name"] == name:
                return e
        return None

    def drop(self, name):
        self.m["trunk"] = [e for e in self.m["trunk"] if e["name"] != name]

    def _append(self, data):
        p = os.path.join(self.dir, "trunk.bin")
        off = os.path.getsize(p)
        with open(p, "ab") as f:
            f.write(data)
        return off

    def put_f32(self, name, arr, shape=None):
        arr = np.asarray(arr, "<f4")
        off = self._append(arr.tobytes())
        self.drop(name)
        self.m["trunk"].append({"name": name, "fmt": 0, "off": off,
                                "shape": list(shape or arr.shape), "bytes": arr.size * 4})

    def put_q(self, name, fmt, q, scales_u16, group=128):
        q = np.asarray(q, np.int64)
        rows, N = q.shape
        ng = -(-N // group)
        Np = ng * group
        qp = np.zeros((rows, Np), np.int64)
        qp[:, :N] = q
        if fmt == 2:
            pay = qp.astype(np.int8).tobytes()
        elif fmt == 3:
            u = (qp + 8).astype(np.uint8)
            pay = (u[:, 0::2] | (u[:, 1::2] << 4)).astype(np.uint8).tobytes()
        elif fmt == 7:
            rb = Np * 3 // 8 + 1
            out = np.zeros((rows, rb), np.uint8)
            u = (qp + 4).astype(np.int64)
            for r in range(rows):
                acc = 0
                for i in range(Np):
                    acc |= int(u[r, i]) << (3 * i)
                out[r] = np.frombuffer(acc.to_bytes(rb, "little"), np.uint8)
            pay = out.tobytes()
        off = self._append(pay)
        soff = self._append(np.asarray(scales_u16, "<u2").tobytes())
        self.drop(name)
        self.m["trunk"].append({"name": name, "fmt": fmt, "off": off, "shape": [rows, N],
                                "group": group, "scale_off": soff,
                                "bytes": len(pay) + 2 * rows * ng})


def raw_q(ct, name):
    """(q int array [rows,N], scales u16 [rows,ng]) of a Q4G/Q8G/Q3G tensor."""
    e = ct.entries[name]
    N = e.shape[-1]
    rows = e.numel // N
    ng = -(-N // e.group)
    su = np.frombuffer(ct.trunk_bytes, "<u2", count=rows * ng, offset=e.scale_off).reshape(rows, ng)
    W = ct.tensor(name).reshape(rows, N).astype(np.float64)
    s = np.repeat(f16_exact(su).astype(np.float64), e.group, axis=1)[:, :N]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s != 0, np.rint(W / s), 0).astype(np.int64)
    return q, su


def write_records(path, L, E, cbid, S, IB, Im, X, recs, pad_garbage=False, rng=None):
    """recs[e] = (idx_g [Im,X/8,S], idx_u, idx_d [X,Im/8,S], scales_u16 [2Im+X])."""
    RL = S if IB == 8 else 3
    shapes = ((Im, X), (Im, X), (X, Im))
    sizes = [-(-M // 64) * (N // 8) * 64 * RL for (M, N) in shapes]
    end = 48 + sum(sizes) + 2 * (2 * Im + X)
    R = 4096 * (-(-end // 4096))
    out = bytearray()
    for e, rec in enumerate(recs):
        body = bytearray()
        for k, (M, N) in enumerate(shapes):
            idx = np.asarray(rec[k], np.int64)
            nv = N // 8
            nb = -(-M // 64)
            full = np.zeros((nb * 64, nv, S), np.int64)
            full[:M] = idx
            if pad_garbage and nb * 64 > M:
                full[M:] = rng.integers(0, 64, size=full[M:].shape)
            blk = full.reshape(nb, 64, nv, S).transpose(0, 2, 1, 3)  # [nb][nv][64][S]
            if IB == 8:
                body += blk.astype(np.uint8).tobytes()
            else:
                w = blk[..., 0] | (blk[..., 1] << 6) | (blk[..., 2] << 12) | (blk[..., 3] << 18)
                b3 = np.stack([w & 255, (w >> 8) & 255, (w >> 16) & 255], axis=-1)
                body += b3.astype(np.uint8).tobytes()
        body += np.asarray(rec[3], "<u2").tobytes()
        uoff = 48 + sizes[0]
        doff = uoff + sizes[1]
        coff = doff + sizes[2]
        hdr = bytearray(48)
        fmt = 8 if IB == 6 else 4
        hdr[0:4] = (0x50584557).to_bytes(4, "little")
        hdr[4:6] = L.to_bytes(2, "little")
        hdr[6:8] = e.to_bytes(2, "little")
        hdr[8] = fmt
        hdr[10:12] = cbid.to_bytes(2, "little")
        hdr[16:20] = (R // 4096).to_bytes(4, "little")
        for o, v in ((20, 48), (24, uoff), (28, doff), (32, coff),
                     (36, zlib.crc32(bytes(body)) & 0xFFFFFFFF)):
            hdr[o:o + 4] = v.to_bytes(4, "little")
        rb = bytes(hdr) + bytes(body)
        out += rb + bytes(R - len(rb))
    with open(path, "wb") as f:
        f.write(out)
    return R


def write_codebooks(path, books):
    """books: f32 array [n, Ne, Vd] (written as f16)."""
    n, Ne, Vd = books.shape
    out = bytearray()
    for i in range(n):
        h = bytearray(16)
        h[0:4] = (0x4B424357).to_bytes(4, "little")
        h[4:6] = (i & 0xFFFF).to_bytes(2, "little")
        h[6] = 4
        h[7] = Vd
        h[8:12] = Ne.to_bytes(4, "little")
        out += h + books[i].astype("<f2").tobytes()
    with open(path, "wb") as f:
        f.write(out)


# ---------------------------------------------------------------------------

def t_worked_example(src):
    ct = Container(src)
    E = ct.tensor("model.embed_tokens.weight")
    ok = abs(E[0, 0] - 0.38432312) < 1e-7 and abs(E[0, 1] + 0.12522888) < 1e-7
    report("§12 Q8G embed W[0,0], W[0,1]", ok, "%.8f %.8f" % (E[0, 0], E[0, 1]))
    n = ct.tensor("model.layers.0.input_layernorm.weight")[0]
    report("§12 F32 input_layernorm[0]", abs(n - 0.30144486) < 1e-8, "%.8f" % n)
    Q = ct.tensor("model.layers.0.self_attn.q_proj.weight")
    report("§12 Q4G q_proj W[0,0], W[0,1]", Q[0, 0] == 0.02484130859375 and Q[0, 1] == -0.02484130859375)
    rec = ct.record(1, 0)
    g = ct.dense(rec, 0)
    exp_g = [-0.0012571, 0.0106626, 0.0132671, 0.0003743, 0.0126375, -0.0072126, 0.0001266, 0.0025847]
    report("§12 VQ3R gate row 0 vec 0", list(rec.idx[0][0, 0]) == [196, 248, 163]
           and np.max(np.abs(g[0, 0:8] - exp_g)) < 6e-8, "idx %s" % list(rec.idx[0][0, 0]))
    d = ct.dense(rec, 2)
    exp_d = [0.0209365, -0.0111905, -0.0165749, -0.0029980, 0.0086328, 0.0006567, -0.0059317, -0.0084176]
    report("§12 VQ3R down row 100 vec 3 (2nd row block)", list(rec.idx[2][100, 3]) == [128, 181, 113]
           and np.max(np.abs(d[100, 24:32] - exp_d)) < 6e-8 and rec.scale[2][100] == 0.04052734375,
           "idx %s" % list(rec.idx[2][100, 3]))
    ct.close()


def t_f16():
    report("f16 scale subnormal exact, codebook subnormal flushed",
           f16_exact(np.array([1], np.uint16))[0] == 2.0 ** -24
           and f16_flush(np.array([1, 0x8001, 0x0400], np.uint16)).tolist() == [0.0, -0.0, 2.0 ** -14])


def t_int4():
    # Checkpoint int4 "pack-quantized" by hand: q = 3 -4 7 -8 0 1 -1 2 5 as
    # nibbles q + 8 (B 4 F 0 8 9 7 A | D), column c at bits 4*(c % 8) of word
    # c // 8; the second word's 7 padding nibbles hold junk. Groups of 3.
    words = [0xA7980F4B, 0x1234567D]
    scale = np.array([[0.5, 0.125, 4.0]], np.float32)
    w = int4_dequantize("I32", (1, 2), b"".join(x.to_bytes(4, "little") for x in words), scale, (1, 9), 3)
    report("checkpoint int4 pack-quantized by hand (sign, nibble order, padding, groups)",
           w.tolist() == [[1.5, -2.0, 3.5, -1.0, 0.0, 0.125, -4.0, 8.0, 20.0]], "%s" % w.tolist())


def t_vq4p_pack(tmp, src):
    # (5, 63, 1, 42) -> C5 1F A8 (FORMAT §6.3)
    w = 5 | (63 << 6) | (1 << 12) | (42 << 18)
    b = [w & 255, (w >> 8) & 255, (w >> 16) & 255]
    report("VQ4P packing example (5,63,1,42) -> C5 1F A8", b == [0xC5, 0x1F, 0xA8])


def t_trunk_reencode(tmp, src, base):
    ct = Container(src)
    w8 = Work(src, tmp, "q8")
    wf = Work(src, tmp, "f32")
    n = 0
    for e in list(ct.entries.values()):
        if e.fmt == 3:
            q, su = raw_q(ct, e.name)
            w8.put_q(e.name, 2, q, su)
            wf.put_f32(e.name, ct.tensor(e.name))
            n += 1
    w8.save()
    wf.save()
    a = logits_of(w8.dir)
    b = logits_of(wf.dir)
    report("Q4G -> Q8G re-encode (%d tensors): identical logits" % n, np.array_equal(a, base))
    report("Q4G -> F32 re-encode: identical logits", np.array_equal(b, base))
    # Q3G: clamp q to -4..3, write the same values as Q4G and as Q3G
    w4 = Work(src, tmp, "q4c")
    w3 = Work(src, tmp, "q3")
    for name in ("model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.f_b_proj.weight",
                 "model.layers.2.self_attn.kv_b_proj.weight", "model.layers.0.mlp.down_proj.weight",
                 "model.layers.1.block_sparse_moe.gate.weight"):
        q, su = raw_q(ct, name)
        q = np.clip(q, -4, 3)
        w4.put_q(name, 3, q, su)
        w3.put_q(name, 7, q, su)
    w4.save()
    w3.save()
    a = logits_of(w4.dir)
    b = logits_of(w3.dir)
    report("Q3G vs Q4G, same values (incl. N=32 padded group)", np.array_equal(a, b),
           "rel vs base %.2e (clamped weights)" % rel(base, a))
    ct.close()


def fixture_records(ct):
    out = {}
    for L in ct.banks:
        out[L] = [ct.record(L, e) for e in range(ct.cfg.E)]
    return out


def scales_u16(rec):
    s = np.concatenate(rec.scale).astype(np.float32)
    return s.astype("<f2").view("<u2")


def t_vq2r(tmp, src):
    ct = Container(src)
    recs = fixture_records(ct)
    c = ct.cfg
    # A: fixture with every stage-2 codebook zeroed
    wa = Work(src, tmp, "vq3z")
    books = ct.books.copy()
    for L in recs:
        b = ct.banks[L]["base"]
        for k in range(3):
            books[b + 3 * k + 2] = 0
    write_codebooks(os.path.join(wa.dir, "codebooks.bin"), books)
    # B: 2-stage VQ2R container with the same stage 0/1 indices and books
    wb = Work(src, tmp, "vq2r")
    nb = []
    for pos, L in enumerate(sorted(recs)):
        b = ct.banks[L]["base"]
        for k in range(3):
            for s in range(2):
                nb.append(ct.books[b + 3 * k + s])
        rl = [(r.idx[0][:, :, :2], r.idx[1][:, :, :2], r.idx[2][:, :, :2], scales_u16(r)) for r in recs[L]]
        R = write_records(os.path.join(wb.dir, "experts-L%d.bin" % L), L, c.E, 6 * pos, 2, 8, c.Im, c.X, rl)
        wb.m["layers"][str(L)].update(bytes=R * c.E, codebook_base=6 * pos)
    write_codebooks(os.path.join(wb.dir, "codebooks.bin"), np.array(nb))
    wb.m["expert_quant"].update(stages=2, fmt="VQ2R", bits_per_weight=2)
    wb.save()
    a = logits_of(wa.dir)
    b = logits_of(wb.dir)
    report("VQ2R == VQ3R with zero stage-2 books (dense)", np.array_equal(a, b))
    a2 = logits_of(wa.dir, mode="lut-f32")
    b2 = logits_of(wb.dir, mode="lut-f32")
    report("VQ2R == VQ3R with zero stage-2 books (lut-f32)", np.array_equal(a2, b2),
           "lut-f32 vs dense rel %.2e" % rel(a, a2))
    ct.close()


def t_vq4p(tmp, src, rng):
    """4 stages x 64 entries: 8-bit indices vs VQ4P 6-bit packing."""
    ct = Container(src)
    recs = fixture_records(ct)
    c = ct.cfg
    w8 = Work(src, tmp, "s4e64")
    w6 = Work(src, tmp, "vq4p")
    nb = []
    per_layer = {}
    for pos, L in enumerate(sorted(recs)):
        b = ct.banks[L]["base"]
        for k in range(3):
            for s in range(3):
                nb.append(ct.books[b + 3 * k + s][:64])
            nb.append((ct.books[b + 3 * k + 2][64:128] * 0.5).astype(np.float32))
        rl = []
        for r in recs[L]:
            mats = []
            for k in range(3):
                i3 = r.idx[k] & 63
                i4 = rng.integers(0, 64, size=i3.shape[:2] + (1,))
                mats.append(np.concatenate([i3, i4], axis=2))
            rl.append((mats[0], mats[1], mats[2], scales_u16(r)))
        per_layer[L] = (pos, rl)
    for w, IB, fmt in ((w8, 8, "VQ4x64"), (w6, 6, "VQ4P")):
        for L, (pos, rl) in per_layer.items():
            R = write_records(os.path.join(w.dir, "experts-L%d.bin" % L), L, c.E, 12 * pos, 4, IB,
                              c.Im, c.X, rl)
            w.m["layers"][str(L)].update(bytes=R * c.E, codebook_base=12 * pos)
        write_codebooks(os.path.join(w.dir, "codebooks.bin"), np.array(nb))
        w.m["expert_quant"].update(stages=4, entries=64, fmt=fmt, bits_per_weight=3)
        if IB == 6:
            w.m["expert_quant"]["index_bits"] = 6
        w.save()
    a = logits_of(w8.dir, mode="dense")
    b = logits_of(w6.dir, mode="dense")
    report("VQ4P (6-bit packed) == 4x64 8-bit indices (dense)", np.array_equal(a, b))
    lut = logits_of(w6.dir)  # default for VQ4P: int8 LUT
    same_arg = bool(np.all(np.argmax(lut, 1) == np.argmax(b, 1)))
    r = rel(b, lut)
    report("VQ4P int8-LUT (default) vs dense: close, argmax", r < 2e-2,
           "rel %.2e, argmax equal at all positions: %s" % (r, same_arg))
    ct.close()


def t_odd_shapes(tmp, src, rng):
    """Im = 40: gate/up have a padded 64-row block; padding content ignored."""
    ct = Container(src)
    c = ct.cfg
    Im = 40
    outs = []
    for garbage in (False, True):
        w = Work(src, tmp, "im40" + ("g" if garbage else ""))
        w.m["config"]["moe_intermediate_size"] = Im
        for L in ct.banks:
            rr = np.random.default_rng(L)
            rl = []
            for e in range(c.E):
                ig = rr.integers(0, 256, size=(Im, c.H // 8, 3))
                iu = rr.integers(0, 256, size=(Im, c.H // 8, 3))
                idn = rr.integers(0, 256, size=(c.H, Im // 8, 3))
                sc = (rr.uniform(0.02, 0.05, size=2 * Im + c.H)).astype("<f2").view("<u2")
                rl.append((ig, iu, idn, sc))
            R = write_records(os.path.join(w.dir, "experts-L%d.bin" % L), L, c.E, ct.banks[L]["base"], 3, 8,
                              Im, c.H, rl, pad_garbage=garbage, rng=rng)
            w.m["layers"][str(L)]["bytes"] = R * c.E
            p = "model.layers.%d.block_sparse_moe.shared_experts." % L
            for n in ("gate_proj", "up_proj"):
                w.put_f32(p + n + ".weight", ct.tensor(p + n + ".weight")[:Im])
            w.put_f32(p + "down_proj.weight", ct.tensor(p + "down_proj.weight")[:, :Im])
        w.save()
        outs.append(logits_of(w.dir))
        if not garbage:
            # round trip: dense reconstruction equals what was encoded
            ct2 = Container(w.dir)
            rec = ct2.record(1, 3)
            rr = np.random.default_rng(1)
            for e in range(4):
                ig = rr.integers(0, 256, size=(Im, c.H // 8, 3))
                iu = rr.integers(0, 256, size=(Im, c.H // 8, 3))
                idn = rr.integers(0, 256, size=(c.H, Im // 8, 3))
                rr.uniform(0.02, 0.05, size=2 * Im + c.H)
            ok = (np.array_equal(rec.idx[0], ig) and np.array_equal(rec.idx[1], iu)
                  and np.array_equal(rec.idx[2], idn))
            report("Im=40 record round trip (blocked layout, padded block)", ok)
            ct2.close()
    report("Im=40 padding rows ignored (garbage vs zero)", np.array_equal(outs[0], outs[1]),
           "finite: %s" % bool(np.all(np.isfinite(outs[0]))))
    ct.close()


def t_features(tmp, src, base):
    ct = Container(src)
    c = ct.cfg
    H = c.H
    # latent MoE with identity projections == plain MoE
    w = Work(src, tmp, "latent")
    w.m["config"]["routed_expert_hidden_size"] = H
    for L in ct.banks:
        p = "model.layers.%d.block_sparse_moe." % L
        w.put_f32(p + "routed_expert_down_proj.weight", np.eye(H))
        w.put_f32(p + "routed_expert_up_proj.weight", np.eye(H))
    w.save()
    a = logits_of(w.dir)
    report("latent MoE, identity down/up == plain MoE", rel(base, a) < 1e-6, "rel %.2e" % rel(base, a))
    # latent norm: RMSNorm(y; w) then identity up; just make sure it runs and changes things
    w.m["config"]["latent_moe_use_norm"] = True
    for L in ct.banks:
        w.put_f32("model.layers.%d.block_sparse_moe.routed_expert_norm.weight" % L, np.full(H, 0.5))
    w.save()
    a = logits_of(w.dir)
    report("latent MoE + norm runs, finite", bool(np.all(np.isfinite(a))), "rel vs base %.2e" % rel(base, a))
    # full-rank KDA gate g_proj = g_b @ g_a
    w = Work(src, tmp, "fullgate")
    w.m["config"]["linear_attn_config"]["use_full_rank_gate"] = True
    for L in range(c.NL):
        if c.is_kda(L):
            p = "model.layers.%d.self_attn." % L
            G = ct.tensor(p + "g_b_proj.weight").astype(np.float64) @ ct.tensor(p + "g_a_proj.weight").astype(np.float64)
            w.drop(p + "g_a_proj.weight")
            w.drop(p + "g_b_proj.weight")
            w.put_f32(p + "g_proj.weight", G)
    w.save()
    a = logits_of(w.dir)
    report("KDA full-rank g_proj = g_b.g_a == low-rank gate", rel(base, a) < 1e-5, "rel %.2e" % rel(base, a))
    # MLA output gate with g_proj = 0 (sigma = 1/2) and o_proj doubled
    w = Work(src, tmp, "mlagate")
    w.m["config"]["mla_use_output_gate"] = True
    for L in range(c.NL):
        if not c.is_kda(L):
            p = "model.layers.%d.self_attn." % L
            w.put_f32(p + "g_proj.weight", np.zeros((c.A * c.dv, H)))
            w.put_f32(p + "o_proj.weight", 2.0 * ct.tensor(p + "o_proj.weight"))
    w.save()
    a = logits_of(w.dir)
    report("MLA output gate g=0 with 2x o_proj == no gate", rel(base, a) < 1e-6, "rel %.2e" % rel(base, a))
    # SiTU with a huge beta and no linear beta == SiLU
    w = Work(src, tmp, "situ")
    w.m["config"].update(hidden_act="situ", activation_situ_beta=1e7)
    w.save()
    a = logits_of(w.dir)
    report("SiTU beta=1e7, no linear beta == SiLU", rel(base, a) < 1e-5, "rel %.2e" % rel(base, a))
    w.m["config"].update(activation_situ_beta=4.0, activation_situ_linear_beta=25.0)
    w.save()
    a = logits_of(w.dir)
    report("SiTU beta=4, beta_lin=25 runs, finite", bool(np.all(np.isfinite(a))), "rel vs base %.2e" % rel(base, a))
    # q LoRA: q_a = I (Rq = H), q_a_layernorm = rms(x) weights can't cancel; check
    # the equivalent: q_b = q_proj, and compare against a re-run where the
    # layer input is the same -- here only a run/finite check plus shape checks.
    w = Work(src, tmp, "qlora")
    w.m["config"]["q_lora_rank"] = 16
    r = np.random.default_rng(5)
    for L in range(c.NL):
        if not c.is_kda(L):
            p = "model.layers.%d.self_attn." % L
            w.drop(p + "q_proj.weight")
            w.put_f32(p + "q_a_proj.weight", r.normal(0, 0.05, (16, H)))
            w.put_f32(p + "q_a_layernorm.weight", np.ones(16))
            w.put_f32(p + "q_b_proj.weight", r.normal(0, 0.05, (c.A * c.dq, 16)))
    w.save()
    a = logits_of(w.dir)
    report("q LoRA (Rq=16) runs, finite", bool(np.all(np.isfinite(a))), "rel vs base %.2e" % rel(base, a))
    # bounded decay gate
    w = Work(src, tmp, "bounded")
    w.m["config"]["linear_attn_config"]["gate_lower_bound"] = -5.0
    w.save()
    a = logits_of(w.dir)
    report("KDA bounded gate (lb=-5) runs, finite", bool(np.all(np.isfinite(a))), "rel vs base %.2e" % rel(base, a))
    # AttnRes
    w = Work(src, tmp, "attnres")
    w.m["config"]["attn_res_block_size"] = 2
    r = np.random.default_rng(7)
    for L in range(c.NL):
        for n in ("self_attention_res_norm", "self_attention_res_proj", "mlp_res_norm", "mlp_res_proj"):
            w.put_f32("model.layers.%d.%s.weight" % (L, n), r.normal(0, 1, H))
    w.put_f32("model.output_attn_res_norm.weight", r.normal(0, 1, H))
    w.put_f32("model.output_attn_res_proj.weight", r.normal(0, 1, (1, H)))
    w.save()
    a = logits_of(w.dir)
    report("AttnRes (B=2) runs, finite", bool(np.all(np.isfinite(a))), "rel vs base %.2e" % rel(base, a))
    # RoPE: rotary at position 0 is the identity, so position 0 logits equal NoPE's
    w = Work(src, tmp, "rope")
    w.m["config"]["mla_use_nope"] = False
    w.save()
    a = logits_of(w.dir)
    report("RoPE: pos 0 == NoPE, later positions differ",
           np.array_equal(a[0], base[0]) and not np.array_equal(a[5], base[5]),
           "rel at last pos %.2e" % rel(base[-1], a[-1]))
    w.m["config"]["rope_scaling"] = {"type": "yarn", "factor": 40, "mscale": 1.0, "mscale_all_dim": 1.0,
                                     "original_max_position_embeddings": 4096, "beta_fast": 32, "beta_slow": 1}
    w.save()
    a = logits_of(w.dir)
    report("YaRN container runs, finite", bool(np.all(np.isfinite(a))))
    ct.close()


def t_rope_units():
    rope = {"theta": 10000.0, "yarn": {"factor": 40.0, "mscale_all_dim": 1.0, "orig": 4096.0,
                                       "beta_fast": 32.0, "beta_slow": 1.0}}
    om, am = rope_omegas(64, rope)
    w0, _ = rope_omegas(64, {"theta": 10000.0, "yarn": None})
    # low = 10, high = 23: j <= 10 keep w0, j >= 23 divided by factor
    ok = (np.array_equal(om[:11], w0[:11]) and np.allclose(om[23:], (w0[23:] / np.float32(40)).astype(np.float32),
                                                            rtol=1e-7) and not np.array_equal(om[11], w0[11]))
    report("YaRN DeepSeek-V3: low 10 / high 23, att_mul", ok and abs(am - 1.8738542) < 1e-6, "att_mul %.7f" % am)
    k2 = {"theta": 50000.0, "yarn": {"factor": 32.0, "mscale_all_dim": 1.0, "orig": 4096.0,
                                     "beta_fast": 1.0, "beta_slow": 1.0}}
    om2, am2 = rope_omegas(64, k2)
    w02, _ = rope_omegas(64, {"theta": 50000.0, "yarn": None})
    ok2 = (np.array_equal(om2[:20], w02[:20]) and np.allclose(om2[20:], (w02[20:] / np.float32(32)), rtol=1e-7))
    report("YaRN Kimi K2: low 19 / high 20, att_mul", ok2 and abs(am2 - 1.8132604) < 1e-6, "att_mul %.7f" % am2)
    x = np.arange(8, dtype=np.float32) + 1
    y = rotate_pairs(x, 3, w0[:4])
    th = np.float32(np.float32(3) * w0[0])
    exp0 = x[0] * np.cos(th) - x[1] * np.sin(th)
    report("RoPE pairs are interleaved (2j, 2j+1)", abs(y[0] - exp0) < 1e-6 and abs(y[1] - (x[0] * np.sin(th) + x[1] * np.cos(th))) < 1e-6)


def t_refusals(tmp, src):
    def refused(name, mut, use=None):
        w = Work(src, tmp, "bad_" + name)
        mut(w)
        w.save()
        try:
            ct = Container(w.dir)
            md = Model(ct, warn=lambda m: None)
            if use:
                use(ct, md)
            ok = False
        except FormatError:
            ok = True
        report("refuses: " + name, ok)

    refused("format_version string", lambda w: w.m.__setitem__("format_version", "0"))
    refused("format_version 1", lambda w: w.m.__setitem__("format_version", 1))
    refused("index_block 32", lambda w: w.m["expert_quant"].__setitem__("index_block", 32))
    refused("index_bits 6 with 3x256", lambda w: w.m["expert_quant"].__setitem__("index_bits", 6))
    refused("mla_use_nope not boolean", lambda w: w.m["config"].__setitem__("mla_use_nope", 1))
    refused("rope_scaling type linear", lambda w: (w.m["config"].__setitem__("mla_use_nope", False),
                                                  w.m["config"].__setitem__("rope_scaling", {"type": "linear", "factor": 2})))
    refused("yarn mscale != mscale_all_dim", lambda w: (w.m["config"].__setitem__("mla_use_nope", False),
                                                       w.m["config"].__setitem__("rope_scaling", {"type": "yarn", "factor": 4})))
    refused("bank entry on dense layer", lambda w: w.m["layers"].__setitem__("0", dict(w.m["layers"]["1"])))
    refused("missing bank entry", lambda w: w.m["layers"].pop("2"))
    refused("codebook_base out of range", lambda w: w.m["layers"]["3"].__setitem__("codebook_base", 20))
    refused("wrong tensor shape", lambda w: w.entry("model.layers.0.self_attn.q_proj.weight").__setitem__("shape", [64, 256]))
    refused("quantised norm vector", lambda w: w.entry("model.norm.weight").__setitem__("fmt", 2))
    refused("trunk fmt 1", lambda w: w.entry("model.layers.0.mlp.up_proj.weight").__setitem__("fmt", 1))

    def corrupt(off, val):
        def mut(w):
            p = os.path.join(w.dir, "experts-L2.bin")
            b = bytearray(open(p, "rb").read())
            b[12288 * 3 + off] = val
            open(p, "wb").write(bytes(b))
        return mut

    def use_all(ct, md):
        for L in ct.banks:
            for e in range(ct.cfg.E):
                ct.record(L, e)
    refused("record bad magic", corrupt(0, 0), use_all)
    refused("record wrong layer", corrupt(4, 1), use_all)
    refused("record wrong expert id", corrupt(6, 5), use_all)
    refused("record fmt 8 with index_bits 8", corrupt(8, 8), use_all)
    refused("record lowrank_id != 0", corrupt(12, 1), use_all)
    refused("record rec_4k_blocks wrong", corrupt(16, 2), use_all)
    refused("record gate_off != 48", corrupt(20, 40), use_all)


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else "/work/shared/fixtures/warp-tiny/container"
    rng = np.random.default_rng(1234)
    tmp = tempfile.mkdtemp(prefix="oracle-selftest-")
    try:
        base = logits_of(src)
        print("== decoding")
        t_worked_example(src)
        t_f16()
        t_int4()
        t_vq4p_pack(tmp, src)
        print("== trunk formats")
        t_trunk_reencode(tmp, src, base)
        print("== expert formats")
        t_vq2r(tmp, src)
        t_vq4p(tmp, src, rng)
        t_odd_shapes(tmp, src, rng)
        print("== model features")
        t_features(tmp, src, base)
        t_rope_units()
        print("== refusals")
        t_refusals(tmp, src)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    ok = all(RESULTS)
    print("%d tests, %s" % (len(RESULTS), "ALL OK" if ok else "%d FAILED" % RESULTS.count(False)))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
