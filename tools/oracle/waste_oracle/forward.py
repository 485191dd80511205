"""Token-by-token forward pass (MODEL.md §2-§5), numpy.

Storage is f32 (every activation/state is rounded to f32 where the reference
keeps an f32 value); the long reductions (matvecs, attention sums,
recurrence products) are done in f64 and then rounded to f32.
"""

import math
import sys

import numpy as np

from .container import FormatError

f32 = np.float32
f64 = np.float64


def _sigmoid64(z):
    z = np.asarray(z, f64)
    return 1.0 / (1.0 + np.exp(-z))


def _softplus64(z):
    z = np.asarray(z, f64)
    return np.where(z > 20.0, z, np.log1p(np.exp(np.minimum(z, 20.0))))


def rmsnorm(x, w, eps):
    x64 = np.asarray(x, f64)
    r = 1.0 / math.sqrt(float(np.dot(x64, x64)) / x64.size + eps)
    return ((x64 * r) * np.asarray(w, f64)).astype(f32)


def rope_omegas(dr, rope):
    """MODEL.md §4.3: float64 frequencies rounded to f32, YaRN ramp, att_mul."""
    half = dr // 2
    base = float(rope["theta"])
    w0 = np.array([f32(base ** (-(2.0 * j) / dr)) for j in range(half)], dtype=f32)
    y = rope["yarn"]
    if y is None:
        return w0, 1.0
    factor = y["factor"]

    def corr(n):
        return dr * math.log(y["orig"] / (n * 2.0 * math.pi)) / (2.0 * math.log(base))
    low = max(math.floor(corr(y["beta_fast"])), 0)
    high = min(math.ceil(corr(y["beta_slow"])), dr - 1)
    low = float(low)
    high = float(high)
    if low == high:
        high += 0.001
    om = np.empty(half, dtype=f32)
    for j in range(half):
        ramp = min(max((j - low) / (high - low), 0.0), 1.0)
        o0 = float(w0[j])
        om[j] = f32((o0 / factor) * ramp + o0 * (1.0 - ramp))
    m = y["mscale_all_dim"]
    att_mul = (0.1 * m * math.log(factor) + 1.0) ** 2 if m != 0 else 1.0
    return om, att_mul


def rotate_pairs(x, pos, omega):
    """GPT-J interleaved rotation of x[..., dr] at position pos; f32 angle."""
    theta = (f32(pos) * omega).astype(f32)  # one f32 rounding of the product
    c = np.cos(theta.astype(f64)).astype(f32).astype(f64)
    s = np.sin(theta.astype(f64)).astype(f32).astype(f64)
    x64 = np.asarray(x, f64)
    a = x64[..., 0::2]
    b = x64[..., 1::2]
    out = np.empty_like(x64)
    out[..., 0::2] = a * c - b * s
    out[..., 1::2] = a * s + b * c
    return out.astype(f32)


# ---------------------------------------------------------------------------
# LUT matvecs for routed experts (MODEL.md §6.4)

def lut_tables(x, C, fma=False):
    """T[v][s][c] = sum_t x[Vd v + t] * C[s][c][t], accumulated over t in
    order in f32 (optionally emulating a fused multiply-add)."""
    S, Ne, Vd = C.shape
    xv = np.asarray(x, f32).reshape(-1, Vd)
    nv = xv.shape[0]
    T = np.zeros((nv, S, Ne), dtype=f32)
    for t in range(Vd):
        if fma:
            T = (T.astype(f64) + xv[:, t, None, None].astype(f64) * C[None, :, :, t].astype(f64)).astype(f32)
        else:
            T = T + (xv[:, t, None, None] * C[None, :, :, t])  # f32 mul, f32 add
    return T


def lut_matvec_f32(T, idx, scale):
    """VQ3R/VQ2R reference order: per row, over v in order, add
    ((T0+T1)+T2...) to an f32 accumulator, then one multiply by the scale."""
    M, nv, S = idx.shape
    acc = np.zeros(M, dtype=f32)
    for v in range(nv):
        part = T[v, 0][idx[:, v, 0]]
        for s in range(1, S):
            part = part + T[v, s][idx[:, v, s]]
        acc = acc + part
    return (acc * scale).astype(f32)


def lut_matvec_int8(T, idx, scale, block=32):
    """VQ4P engine path: tables quantised to int8 per block of 32 vector
    positions, exact integer sums, acc += tau_b * sum in f32."""
    M, nv, S = idx.shape
    acc = np.zeros(M, dtype=f32)
    for b0 in range(0, nv, block):
        b1 = min(nv, b0 + block)
        Tb = T[b0:b1]
        m = f32(np.max(np.abs(Tb))) if Tb.size else f32(0)
        if m == 0:
            continue  # all q = 0: contributes exactly 0
        inv = f32(f32(127.0) / m)
        q = np.rint((Tb * inv).astype(f32))  # round half to even
        q = np.clip(q, -127, 127).astype(np.int32)
        tau = f32(m / f32(127.0))
        vi = np.arange(b1 - b0)[None, :, None]
        si = np.arange(S)[None, None, :]
        g = q[vi, si, idx[:, b0:b1, :]]  # [M, nvb, S]
        isum = g.sum(axis=(1, 2)).astype(np.int64)  # exact
        acc = (acc + (tau * isum.astype(f32)).astype(f32)).astype(f32)
    return (acc * scale).astype(f32)


# ---------------------------------------------------------------------------

class Model:
    """expert_mode: 'dense' (reconstruct W, f64 matvec), 'lut-f32' (engine
    table order, f32) or 'lut-int8' (VQ4P engine int8 tables)."""

    def __init__(self, ct, expert_mode=None, lut_fma=False, warn=None,
                 tie_gap=1e-5):
        self.ct = ct
        self.c = ct.cfg
        self.warn = warn or (lambda m: print("oracle: " + m, file=sys.stderr))
        if expert_mode is None:
            expert_mode = "lut-int8" if ct.eq.IB == 6 else "dense"
        self.expert_mode = expert_mode
        self.lut_fma = lut_fma
        self.tie_gap = tie_gap
        self._w64 = {}
        c = self.c
        if c.rope is not None:
            self.omega, self.att_mul = rope_omegas(c.dr, c.rope)
        else:
            self.omega, self.att_mul = None, 1.0
        self._check_tensors()
        self.reset()

    # -- tensor access with the §4.7/§4.8 kind rules --
    def M(self, name, rows, cols):
        """Matrix [rows, cols] as f64."""
        key = name
        W = self._w64.get(key)
        if W is None:
            e = self.ct.entry(name)
            if e is None or len(e.shape) != 2 or tuple(e.shape) != (rows, cols):
                raise FormatError("required tensor is missing or has the wrong shape: %s%s"
                                  % (self.ct.prefix, name))
            W = self.ct.tensor(name).astype(f64)
            self._w64[key] = W
        return W

    def Vec(self, name, n):
        e = self.ct.entry(name)
        if e is None or e.fmt != 0 or e.numel != n:
            raise FormatError("required tensor is missing or has the wrong shape: %s%s"
                              % (self.ct.prefix, name))
        return self.ct.tensor(name).reshape(-1)

    def Data(self, name, n):
        e = self.ct.entry(name)
        if e is None or e.fmt != 0 or e.numel < n:
            raise FormatError("required tensor is missing or has the wrong shape: %s%s"
                              % (self.ct.prefix, name))
        return self.ct.tensor(name).reshape(-1)

    def _check_tensors(self):
        """Touch every required tensor once (load-time validation, §8.1/14)."""
        c = self.c
        H, V = c.H, c.V
        self.M("model.embed_tokens.weight", V, H)
        self.Vec("model.norm.weight", H)
        self.M("lm_head.weight", V, H)
        if c.attn_res_B > 0:
            self.Vec("model.output_attn_res_norm.weight", H)
            self.Vec("model.output_attn_res_proj.weight", H)
        for L in range(c.NL):
            p = "model.layers.%d." % L
            self.Vec(p + "input_layernorm.weight", H)
            self.Vec(p + "post_attention_layernorm.weight", H)
            if c.attn_res_B > 0:
                for n in ("self_attention_res_norm", "self_attention_res_proj",
                          "mlp_res_norm", "mlp_res_proj"):
                    self.Vec(p + n + ".weight", H)
            a = p + "self_attn."
            if c.is_kda(L):
                Ck, Dk, Hk, Kc = c.Ck, c.Dk, c.Hk, c.Kc
                for n in ("q", "k", "v"):
                    self.M(a + n + "_proj.weight", Ck, H)
                    self.Data(a + n + "_conv1d.weight", Ck * Kc)
                self.M(a + "f_a_proj.weight", Dk, H)
                self.M(a + "f_b_proj.weight", Ck, Dk)
                self.M(a + "b_proj.weight", Hk, H)
                self.Data(a + "A_log", Hk)
                self.Data(a + "dt_bias", Ck)
                if c.full_rank_gate:
                    self.M(a + "g_proj.weight", Ck, H)
                else:
                    self.M(a + "g_a_proj.weight", Dk, H)
                    self.M(a + "g_b_proj.weight", Ck, Dk)
                self.Vec(a + "o_norm.weight", Dk)
                self.M(a + "o_proj.weight", H, Ck)
            else:
                if c.Rq > 0:
                    self.M(a + "q_a_proj.weight", c.Rq, H)
                    self.Vec(a + "q_a_layernorm.weight", c.Rq)
                    self.M(a + "q_b_proj.weight", c.A * c.dq, c.Rq)
                else:
                    self.M(a + "q_proj.weight", c.A * c.dq, H)
                self.M(a + "kv_a_proj_with_mqa.weight", c.Rkv + c.dr, H)
                self.Vec(a + "kv_a_layernorm.weight", c.Rkv)
                self.M(a + "kv_b_proj.weight", c.A * (c.dn + c.dv), c.Rkv)
                if c.mla_gate:
                    self.M(a + "g_proj.weight", c.A * c.dv, H)
                self.M(a + "o_proj.weight", H, c.A * c.dv)
            m = p + "block_sparse_moe."
            has_router = self.ct.has(m + "gate.weight")
            if has_router != c.is_moe(L):
                raise FormatError("layer %d: router presence disagrees with num_experts/"
                                  "first_k_dense_replace" % L)
            if c.is_moe(L):
                self.M(m + "gate.weight", c.E, H)
                self.M(m + "shared_experts.gate_proj.weight", c.Ssh, H)
                self.M(m + "shared_experts.up_proj.weight", c.Ssh, H)
                self.M(m + "shared_experts.down_proj.weight", H, c.Ssh)
                if c.Lat > 0:
                    self.M(m + "routed_expert_down_proj.weight", c.Lat, H)
                    self.M(m + "routed_expert_up_proj.weight", H, c.Lat)
                    if c.latent_norm:
                        self.Vec(m + "routed_expert_norm.weight", c.Lat)
            else:
                self.M(p + "mlp.gate_proj.weight", c.Id, H)
                self.M(p + "mlp.up_proj.weight", c.Id, H)
                self.M(p + "mlp.down_proj.weight", H, c.Id)

    def bias(self, L):
        name = "model.layers.%d.block_sparse_moe.gate.e_score_correction_bias" % L
        e = self.ct.entry(name)
        if e is None or e.fmt != 0:
            if e is not None:
                self.warn("layer %d: quantised e_score_correction_bias ignored (treated as 0)" % L)
            return np.zeros(self.c.E, f32)
        if e.numel < self.c.E:
            raise FormatError("e_score_correction_bias of layer %d has < E elements" % L)
        return self.ct.tensor(name).reshape(-1)[: self.c.E]

    # -- state (§10) --
    def reset(self):
        c = self.c
        self.pos = 0
        self.kda = {}
        self.mla = {}
        for L in range(c.NL):
            if c.is_kda(L):
                self.kda[L] = dict(
                    S=np.zeros((c.Hk, c.Dk, c.Dk), f32),
                    ring=np.zeros((3, c.Ck, max(c.Kc - 1, 0)), f32))
            else:
                self.mla[L] = dict(C=np.zeros((0, c.Rkv), f32), KR=np.zeros((0, c.dr), f32))
        self.routes = []     # (pos, L, ids, weights)
        self.near_ties = []  # (pos, L, gap)

    # -- building blocks --
    def mv(self, name, rows, cols, x):
        return (self.M(name, rows, cols) @ np.asarray(x, f64)).astype(f32)

    def act(self, g, u):
        c = self.c
        g64 = np.asarray(g, f64)
        u64 = np.asarray(u, f64)
        if c.situ:
            b = c.situ_beta
            left = (b * np.tanh(g64 / b)).astype(f32).astype(f64) * _sigmoid64(g64)
            if c.situ_lin_beta > 0:
                bl = c.situ_lin_beta
                right = bl * np.tanh(u64 / bl)
            else:
                right = u64
            return (left.astype(f32).astype(f64) * right.astype(f32).astype(f64)).astype(f32)
        silu = (g64 / (1.0 + np.exp(-g64))).astype(f32)
        return (silu.astype(f64) * u64).astype(f32)

    def mlp(self, pfx, width, x):
        H = self.c.H
        g = self.mv(pfx + "gate_proj.weight", width, H, x)
        u = self.mv(pfx + "up_proj.weight", width, H, x)
        h = self.act(g, u)
        return self.mv(pfx + "down_proj.weight", H, width, h)

    # -- KDA (§3) --
    def kda_layer(self, L, x):
        c = self.c
        a = "model.layers.%d.self_attn." % L
        st = self.kda[L]
        H, Ck, Hk, Dk, Kc = c.H, c.Ck, c.Hk, c.Dk, c.Kc
        outs = []
        for pi, n in enumerate(("q", "k", "v")):
            u = self.mv(a + n + "_proj.weight", Ck, H, x)
            w = self.Data(a + n + "_conv1d.weight", Ck * Kc)[: Ck * Kc].reshape(Ck, Kc).astype(f64)
            ring = st["ring"][pi]
            y = u.astype(f64) * w[:, Kc - 1]
            if Kc > 1:
                y = (ring.astype(f64) * w[:, : Kc - 1]).sum(axis=1) + y
                ring[:, :-1] = ring[:, 1:]
                ring[:, -1] = u
            y = y.astype(f32).astype(f64)
            outs.append((y / (1.0 + np.exp(-y))).astype(f32))
        q, k, v = outs
        # decay gate
        fa = self.mv(a + "f_a_proj.weight", Dk, H, x)
        z = (self.M(a + "f_b_proj.weight", Ck, Dk) @ fa.astype(f64)).astype(f32)
        z = (z + self.Data(a + "dt_bias", Ck)[:Ck]).astype(f32)
        A = np.exp(self.Data(a + "A_log", Hk)[:Hk].astype(f64)).astype(f32)  # a_h
        Ach = np.repeat(A, Dk).astype(f64)
        lb = c.gate_lower_bound
        if lb < 0:
            g = (f32(lb) * _sigmoid64((Ach * z).astype(f32))).astype(f32)
        else:
            g = (-Ach * _softplus64(z).astype(f32)).astype(f32)
        beta = _sigmoid64(self.mv(a + "b_proj.weight", Hk, H, x)).astype(f32)
        # recurrence
        q2 = q.reshape(Hk, Dk).astype(f64)
        k2 = k.reshape(Hk, Dk).astype(f64)
        v2 = v.reshape(Hk, Dk).astype(f64)
        qf = (1.0 / np.sqrt((q2 * q2).sum(axis=1) + 1e-12)).astype(f32).astype(f64) * (Dk ** -0.5)
        qf = qf.astype(f32).astype(f64)
        kf = (1.0 / np.sqrt((k2 * k2).sum(axis=1) + 1e-12)).astype(f32).astype(f64)
        qh = (q2 * qf[:, None]).astype(f32).astype(f64)
        kh = (k2 * kf[:, None]).astype(f32).astype(f64)
        S = st["S"].astype(f64)
        dec = np.exp(g.reshape(Hk, Dk).astype(f64)).astype(f32).astype(f64)
        S = (S * dec[:, :, None]).astype(f32).astype(f64)  # decay first
        u = np.einsum("hij,hi->hj", S, kh).astype(f32).astype(f64)
        delta = (beta.astype(f64)[:, None] * (v2 - u)).astype(f32).astype(f64)
        S = (S + kh[:, :, None] * delta[:, None, :]).astype(f32)
        st["S"] = S
        o = np.einsum("hij,hi->hj", S.astype(f64), qh).astype(f32)  # read after update
        # output gate
        if c.full_rank_gate:
            gam = self.mv(a + "g_proj.weight", Ck, H, x)
        else:
            ga = self.mv(a + "g_a_proj.weight", Dk, H, x)
            gam = (self.M(a + "g_b_proj.weight", Ck, Dk) @ ga.astype(f64)).astype(f32)
        onw = self.Vec(a + "o_norm.weight", Dk)
        sg = _sigmoid64(gam.reshape(Hk, Dk)).astype(f32)
        ot = np.empty((Hk, Dk), f32)
        for h in range(Hk):
            ot[h] = (rmsnorm(o[h], onw, c.eps).astype(f64) * sg[h]).astype(f32)
        return self.mv(a + "o_proj.weight", H, Ck, ot.reshape(-1))

    # -- MLA (§4) --
    def mla_layer(self, L, x):
        c = self.c
        a = "model.layers.%d.self_attn." % L
        st = self.mla[L]
        H, A, dn, dr, dv, dq, Rkv = c.H, c.A, c.dn, c.dr, c.dv, c.dq, c.Rkv
        if c.Rq > 0:
            qa = self.mv(a + "q_a_proj.weight", c.Rq, H, x)
            qa = rmsnorm(qa, self.Vec(a + "q_a_layernorm.weight", c.Rq), c.eps)
            q = self.mv(a + "q_b_proj.weight", A * dq, c.Rq, qa)
        else:
            q = self.mv(a + "q_proj.weight", A * dq, H, x)
        q = q.reshape(A, dq)
        kv = self.mv(a + "kv_a_proj_with_mqa.weight", Rkv + dr, H, x)
        cl = rmsnorm(kv[:Rkv], self.Vec(a + "kv_a_layernorm.weight", Rkv), c.eps)
        kr = kv[Rkv:].copy()
        qn = q[:, :dn]
        qr = q[:, dn:].copy()
        if self.omega is not None:
            qr = rotate_pairs(qr, self.pos, self.omega)
            kr = rotate_pairs(kr, self.pos, self.omega)
        st["C"] = np.concatenate([st["C"], cl[None, :]], axis=0)
        st["KR"] = np.concatenate([st["KR"], kr[None, :]], axis=0)
        C = st["C"].astype(f64)
        KR = st["KR"].astype(f64)
        Wkv = self.M(a + "kv_b_proj.weight", A * (dn + dv), Rkv).reshape(A, dn + dv, Rkv)
        Wkb = Wkv[:, :dn, :]
        Wvb = Wkv[:, dn:, :]
        scale = float(f32(self.att_mul / math.sqrt(dq)))
        # expanded form: k_nope(h,s) = Wkb_h c_s, v(h,s) = Wvb_h c_s
        Kn = np.einsum("hnr,tr->htn", Wkb, C)
        Vv = np.einsum("hvr,tr->htv", Wvb, C)
        sc = (np.einsum("hn,htn->ht", qn.astype(f64), Kn) + qr.astype(f64) @ KR.T) * scale
        sc = sc.astype(f32).astype(f64)
        sc = sc - sc.max(axis=1, keepdims=True)
        e = np.exp(sc)
        al = e / e.sum(axis=1, keepdims=True)
        o = np.einsum("ht,htv->hv", al, Vv).astype(f32).reshape(-1)
        if c.mla_gate:
            gg = self.mv(a + "g_proj.weight", A * dv, H, x)
            o = (o.astype(f64) * _sigmoid64(gg)).astype(f32)
        return self.mv(a + "o_proj.weight", H, A * dv, o)

    # -- MoE (§5) --
    def route(self, L, x):
        c = self.c
        m = "model.layers.%d.block_sparse_moe." % L
        lg = self.mv(m + "gate.weight", c.E, c.H, x)
        if c.scoring == "softmax":
            z = np.exp(np.asarray(lg, f64) - float(np.max(lg)))
            s = (z / z.sum()).astype(f32)
        else:
            s = _sigmoid64(lg).astype(f32)
        sel = (s + self.bias(L)).astype(f32)
        work = sel.astype(f64).copy()
        if c.grouped:
            # Group score: the sum of the group's two best biased scores
            # (noaux_tc) or its best score (group_limited_greedy). Only the
            # experts of the topk_group best groups stay candidates; equal
            # group scores keep the lower group id.
            per = c.E // c.n_group
            groups = sel.reshape(c.n_group, per)
            if c.topk_method == "noaux_tc":
                top = -np.sort(-groups, axis=1)
                gscore = (top[:, 0] + top[:, 1]).astype(f32)
            else:
                gscore = groups.max(axis=1)
            order = sorted(range(c.n_group), key=lambda g: (-float(gscore[g]), g))
            keep = np.zeros(c.E, dtype=bool)
            for g in order[:c.topk_group]:
                keep[g * per:(g + 1) * per] = True
            work[~keep] = -np.inf
        ids = []
        for _ in range(c.K):
            i = int(np.argmax(work))  # first max => lowest id on ties
            ids.append(i)
            work[i] = -np.inf
        # near-tie at the top-K boundary
        if c.K < c.E:
            kth = float(sel[ids[-1]])
            rest = float(np.max(work))
            gap = kth - rest
            if gap < self.tie_gap:
                self.near_ties.append((self.pos, L, gap))
        w = s[ids].astype(f32)
        if c.renorm and c.K > 1:
            tot = f32(0)
            for v in w:
                tot = f32(tot + v)
            w = (w / f32(tot + f32(1e-20))).astype(f32)
        w = (w * f32(c.rsf)).astype(f32)
        return ids, w

    def expert_apply(self, L, e, xe, T_gu):
        ct = self.ct
        rec = ct.record(L, e)
        c = self.c
        if self.expert_mode == "dense":
            if rec.dense is None:
                rec.dense = [ct.dense(rec, k) for k in range(3)]
            Wg, Wu, Wd = rec.dense
            g = (Wg @ xe.astype(f64)).astype(f32)
            u = (Wu @ xe.astype(f64)).astype(f32)
            h = self.act(g, u)
            return (Wd @ h.astype(f64)).astype(f32)
        key = rec.cb
        if key not in T_gu:
            T_gu[key] = (lut_tables(xe, ct.codebooks(rec.cb, 0), self.lut_fma),
                         lut_tables(xe, ct.codebooks(rec.cb, 1), self.lut_fma))
        Tg, Tu = T_gu[key]
        mvf = lut_matvec_int8 if self.expert_mode == "lut-int8" else lut_matvec_f32
        g = mvf(Tg, rec.idx[0], rec.scale[0])
        u = mvf(Tu, rec.idx[1], rec.scale[1])
        h = self.act(g, u)
        Td = lut_tables(h, ct.codebooks(rec.cb, 2), self.lut_fma)
        return mvf(Td, rec.idx[2], rec.scale[2])

    def moe_layer(self, L, x):
        c = self.c
        m = "model.layers.%d.block_sparse_moe." % L
        ids, w = self.route(L, x)
        self.routes.append((self.pos, L, ids, w))
        if c.Lat > 0:
            xe = self.mv(m + "routed_expert_down_proj.weight", c.Lat, c.H, x)
        else:
            xe = x
        y = np.zeros(c.X, f32)
        T_gu = {}
        for j, e in enumerate(ids):
            d = self.expert_apply(L, e, xe, T_gu)
            y = (y.astype(f64) + float(w[j]) * d.astype(f64)).astype(f32)
        if c.Lat > 0:
            if c.latent_norm:
                y = rmsnorm(y, self.Vec(m + "routed_expert_norm.weight", c.Lat), c.eps)
            y = self.mv(m + "routed_expert_up_proj.weight", c.H, c.Lat, y)
        sh = self.mlp(m + "shared_experts.", c.Ssh, x)
        return (y.astype(f64) + sh.astype(f64)).astype(f32)

    def ffn(self, L, x):
        if self.c.is_moe(L):
            return self.moe_layer(L, x)
        return self.mlp("model.layers.%d.mlp." % L, self.c.Id, x)

    def attn(self, L, x):
        return self.kda_layer(L, x) if self.c.is_kda(L) else self.mla_layer(L, x)

    # -- AttnRes (§2.4) --
    def mix(self, blocks, p, a, b):
        Vs = [bb.astype(f64) for bb in blocks] + [np.asarray(p, f64)]
        ab = np.asarray(a, f64) * np.asarray(b, f64)
        sc = []
        for Vi in Vs:
            r = 1.0 / math.sqrt(float(np.dot(Vi, Vi)) / Vi.size + self.c.eps)
            sc.append(float(np.dot(Vi * r, ab)))
        sc = np.array(sc, f64).astype(f32).astype(f64)
        ex = np.exp(sc - sc.max())
        al = ex / ex.sum()
        out = al[-1] * Vs[-1]
        for i in range(len(Vs) - 1):
            out = out + al[i] * Vs[i]
        return out.astype(f32)

    # -- one token --
    def step(self, tok):
        c = self.c
        if not (0 <= tok < c.V):
            raise ValueError("token id %d out of range [0, %d)" % (tok, c.V))
        x = self.ct.embed_row(tok)
        hid = np.zeros((c.NL, c.H), f32)
        if c.attn_res_B > 0:
            B = c.attn_res_B
            blocks = []
            for L in range(c.NL):
                p = "model.layers.%d." % L
                part = x
                if blocks:
                    x = self.mix(blocks, part, self.Vec(p + "self_attention_res_norm.weight", c.H),
                                 self.Vec(p + "self_attention_res_proj.weight", c.H))
                if L % B == 0:
                    blocks.append(part)
                    part = None
                at = self.attn(L, rmsnorm(x, self.Vec(p + "input_layernorm.weight", c.H), c.eps))
                part = at if part is None else (part.astype(f64) + at.astype(f64)).astype(f32)
                x = self.mix(blocks, part, self.Vec(p + "mlp_res_norm.weight", c.H),
                             self.Vec(p + "mlp_res_proj.weight", c.H))
                f = self.ffn(L, rmsnorm(x, self.Vec(p + "post_attention_layernorm.weight", c.H), c.eps))
                part = (part.astype(f64) + f.astype(f64)).astype(f32)
                x = part
                hid[L] = part
            x = self.mix(blocks, x, self.Vec("model.output_attn_res_norm.weight", c.H),
                         self.Vec("model.output_attn_res_proj.weight", c.H))
        else:
            for L in range(c.NL):
                p = "model.layers.%d." % L
                at = self.attn(L, rmsnorm(x, self.Vec(p + "input_layernorm.weight", c.H), c.eps))
                x = (x.astype(f64) + at.astype(f64)).astype(f32)
                f = self.ffn(L, rmsnorm(x, self.Vec(p + "post_attention_layernorm.weight", c.H), c.eps))
                x = (x.astype(f64) + f.astype(f64)).astype(f32)
                hid[L] = x
        h = rmsnorm(x, self.Vec("model.norm.weight", c.H), c.eps)
        logits = (self.M("lm_head.weight", c.V, c.H) @ h.astype(f64)).astype(f32)
        self.pos += 1
        return logits, hid
