"""WASTE container v0 reader (FORMAT.md), numpy only.

Everything here is derived from /work/shared/spec/FORMAT.md (section numbers
in comments refer to it) and MODEL.md §6.
"""

import json
import math
import os
import zlib

import numpy as np


class FormatError(Exception):
    """The container violates FORMAT.md (the engine would refuse it)."""


# ---------------------------------------------------------------------------
# f16 helpers

def f16_exact(u16):
    """IEEE binary16 -> f32, subnormals decoded exactly (trunk/record scales)."""
    return np.asarray(u16, dtype="<u2").view("<f2").astype(np.float32)


def f16_flush(u16):
    """IEEE binary16 -> f32 with subnormals flushed to +-0 (codebook entries,
    FORMAT.md §5 "Entry decoding", MODEL.md §6.4)."""
    u = np.asarray(u16, dtype="<u2")
    v = u.view("<f2").astype(np.float32)
    sub = ((u & 0x7C00) == 0) & ((u & 0x03FF) != 0)
    if sub.any():
        v = v.copy()
        v[sub] = np.where((u[sub] & 0x8000) != 0, np.float32(-0.0), np.float32(0.0))
    return v


# ---------------------------------------------------------------------------
# JSON dialect helpers (§3.1)

def _first_wins(pairs):
    d = {}
    for k, v in pairs:
        if k not in d:
            d[k] = v
    return d


def _is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def jnum(obj, key, default):
    v = obj.get(key) if isinstance(obj, dict) else None
    if _is_num(v):
        return float(v)
    return default


def jint(obj, key, default):
    v = obj.get(key) if isinstance(obj, dict) else None
    if _is_num(v):
        f = float(v)
        if math.isnan(f) or math.isinf(f):
            return default
        return int(math.trunc(f))
    return default


def jstr(obj, key, default):
    v = obj.get(key) if isinstance(obj, dict) else None
    return v if isinstance(v, str) else default


def jpresent(obj, key):
    return isinstance(obj, dict) and key in obj


# ---------------------------------------------------------------------------

TRUNK_FMTS = {0: "F32", 2: "Q8G", 3: "Q4G", 7: "Q3G"}


class TrunkEntry:
    __slots__ = ("name", "fmt", "off", "shape", "group", "scale_off", "bytes")

    def __init__(self, d):
        self.name = jstr(d, "name", "")
        self.fmt = jint(d, "fmt", 0)
        self.off = jint(d, "off", 0)
        sh = d.get("shape")
        if not isinstance(sh, list) or not all(_is_num(x) for x in sh):
            raise FormatError("trunk entry %r: bad shape" % self.name)
        self.shape = tuple(int(math.trunc(float(x))) for x in sh)
        self.group = jint(d, "group", 128)
        self.scale_off = jint(d, "scale_off", 0)
        self.bytes = jint(d, "bytes", 0)

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n


class Config:
    """Parsed model config (FORMAT.md §3.6, MODEL.md §1.2), engine semantics."""

    def __init__(self, cfg, warn):
        c = cfg
        self.raw = c
        self.NL = jint(c, "num_hidden_layers", 0)
        self.H = jint(c, "hidden_size", 0)
        self.V = jint(c, "vocab_size", 0)
        self.A = jint(c, "num_attention_heads", 0)
        self.E = jint(c, "num_experts", 0)
        self.K = jint(c, "num_experts_per_token", 0)
        self.Im = jint(c, "moe_intermediate_size", 0)
        self.Id = jint(c, "intermediate_size", 0)
        self.Ns = jint(c, "num_shared_experts", 0)
        self.F = jint(c, "first_k_dense_replace", 0)
        self.Rkv = jint(c, "kv_lora_rank", 0)
        self.Rq = jint(c, "q_lora_rank", 0)
        self.dn = jint(c, "qk_nope_head_dim", 0)
        self.dr = jint(c, "qk_rope_head_dim", 0)
        self.dv = jint(c, "v_head_dim", 0)
        self.eps = jnum(c, "rms_norm_eps", 1e-5)
        self.rsf = jnum(c, "routed_scaling_factor", 1.0)
        self.renorm = jpresent(c, "moe_renormalize")
        # Router as the HF DeepSeek modelling code defines it (not the
        # reference, which always scores by sigmoid and never groups):
        # scoring_func sigmoid|softmax, and the group-limited choice of
        # topk_method noaux_tc (V3/R1) or group_limited_greedy (V2).
        self.scoring = jstr(c, "moe_router_activation_func", jstr(c, "scoring_func", "sigmoid"))
        self.n_group = jint(c, "n_group", jint(c, "num_expert_group", 1))
        self.topk_group = jint(c, "topk_group", self.n_group)
        self.topk_method = jstr(c, "topk_method", "noaux_tc")
        self.hidden_act = jstr(c, "hidden_act", "")
        self.situ = self.hidden_act == "situ"
        self.situ_beta = jnum(c, "activation_situ_beta", 1.0)
        self.situ_lin_beta = jnum(c, "activation_situ_linear_beta", 0.0)
        self.Lat = jint(c, "routed_expert_hidden_size", 0)
        self.latent_norm = jpresent(c, "latent_moe_use_norm")
        self.attn_res_B = jint(c, "attn_res_block_size", 0)
        self.mla_gate = jpresent(c, "mla_use_output_gate")
        self.rope_theta = jnum(c, "rope_theta", 10000.0)
        self.rope_scaling = c.get("rope_scaling")
        if "mla_use_nope" in c and not isinstance(c["mla_use_nope"], bool):
            raise FormatError("mla_use_nope present but not a JSON boolean")
        self.mla_use_nope = c.get("mla_use_nope") is True
        lac = c.get("linear_attn_config")
        if not isinstance(lac, dict):
            lac = {}
        kl = lac.get("kda_layers")
        self.kda_layers = set()
        if isinstance(kl, list):
            for v in kl:
                if _is_num(v):
                    iv = int(math.trunc(float(v)))
                    if 1 <= iv <= 128:
                        self.kda_layers.add(iv - 1)  # 1-based in the config
        self.Hk = jint(lac, "num_heads", 0)
        self.Dk = jint(lac, "head_dim", 0)
        self.Kc = jint(lac, "short_conv_kernel_size", 4)
        self.full_rank_gate = jpresent(lac, "use_full_rank_gate")
        self.gate_lower_bound = jnum(lac, "gate_lower_bound", 0.0)

        # presence flags whose value says "off": the reference still turns
        # them on (FORMAT §3.1); we follow the reference but say so.
        for obj, key in ((c, "moe_renormalize"), (c, "latent_moe_use_norm"),
                         (c, "mla_use_output_gate"), (lac, "use_full_rank_gate")):
            if key in obj and obj[key] in (False, None, 0):
                warn("config key %r is present with value %r: presence enables it "
                     "(reference semantics)" % (key, obj[key]))

        self.X = self.Lat if self.Lat > 0 else self.H
        self.dq = self.dn + self.dr
        self.Ck = self.Hk * self.Dk
        self.Ssh = self.Im * max(self.Ns, 1)
        self._validate()

    @property
    def grouped(self):
        """Whether the router keeps only topk_group of n_group groups
        (topk_method greedy means a plain top-k over every expert)."""
        return (self.E > 0 and self.topk_group < self.n_group
                and self.topk_method != "greedy")

    def is_kda(self, L):
        return L in self.kda_layers

    def is_moe(self, L):
        return self.E > 0 and L >= self.F

    def _validate(self):
        """§3.7 sanity bounds."""
        def need(cond, what):
            if not cond:
                raise FormatError("manifest config is out of range: " + what)
        need(1 <= self.NL <= 128, "num_hidden_layers")
        need(1 <= self.H <= 1 << 20, "hidden_size")
        need(1 <= self.V <= 1 << 24, "vocab_size")
        need(1 <= self.A <= 1 << 16, "num_attention_heads")
        need(not math.isnan(self.eps) and 0 < self.eps < 1, "rms_norm_eps")
        need(0 <= self.E <= 1 << 20, "num_experts")
        if self.E > 0:
            need(1 <= self.K <= min(self.E, 64), "num_experts_per_token")
            need(self.Im >= 1, "moe_intermediate_size")
        need(0 <= self.Im <= 1 << 20 and 0 <= self.Id <= 1 << 20, "intermediate sizes")
        need(0 <= self.Hk <= 1 << 16 and 0 <= self.Dk <= 1 << 16, "kda heads/dim")
        need(0 <= self.Kc <= 64, "short_conv_kernel_size")
        for v, n in ((self.Rkv, "kv_lora_rank"), (self.Rq, "q_lora_rank"),
                     (self.dn, "qk_nope_head_dim"), (self.dr, "qk_rope_head_dim"),
                     (self.dv, "v_head_dim")):
            need(0 <= v <= 1 << 20, n)
        need(0 <= self.F <= self.NL, "first_k_dense_replace")
        need(0 <= self.Ns <= 64, "num_shared_experts")
        need(0 <= self.Lat <= 1 << 20, "routed_expert_hidden_size")
        need(0 <= self.attn_res_B <= self.NL, "attn_res_block_size")
        any_kda = any(L in self.kda_layers for L in range(self.NL))
        any_mla = any(L not in self.kda_layers for L in range(self.NL))
        if any_kda:
            need(self.Hk >= 1 and self.Dk >= 1 and self.Kc >= 1, "kda geometry")
            need(self.Hk * self.Dk <= 2**31 - 1, "kda width")
        if any_mla:
            need(self.Rkv >= 1 and self.dn + self.dr >= 1 and self.dv >= 1, "mla geometry")
            need(self.A * self.dq <= 2**31 - 1 and self.A * self.dv <= 2**31 - 1
                 and self.A * (self.dn + self.dv) <= 2**31 - 1, "mla width")
        if self.E == 0 or self.F > 0:
            need(self.Id >= 1, "intermediate_size")
        need(self.scoring in ("sigmoid", "softmax"), "scoring_func")
        if self.E > 0:
            need(1 <= self.n_group <= self.E and self.E % self.n_group == 0, "n_group")
            need(1 <= self.topk_group <= self.n_group, "topk_group")
            if self.grouped:
                need(self.topk_method in ("noaux_tc", "group_limited_greedy"), "topk_method")
                need(self.K <= self.topk_group * (self.E // self.n_group),
                     "num_experts_per_token > experts in the kept groups")
        need(self.Ssh <= 2**31 - 1, "shared width")


class ExpertQuant:
    def __init__(self, eq):
        if not isinstance(eq, dict):
            eq = {}
        self.S = jint(eq, "stages", 3)
        self.Vd = jint(eq, "vec_dim", 8)
        self.Ne = jint(eq, "entries", 256)
        self.IB = jint(eq, "index_bits", 8)
        if not (1 <= self.S <= 8 and 1 <= self.Vd <= 64 and 1 <= self.Ne <= 256):
            raise FormatError("expert_quant out of bounds")
        if not (self.IB == 8 or (self.IB == 6 and self.S == 4 and self.Ne == 64)):
            raise FormatError("expert_quant index_bits must be 8, or 6 with 4 stages x 64 entries")
        if "index_block" in eq and jint(eq, "index_block", -1) != 64:
            raise FormatError("expert_quant index_block present and not 64")
        self.RL = self.S if self.IB == 8 else 3
        self.fmt = jstr(eq, "fmt", "")


class ExpertRecord:
    """Decoded expert: per matrix kind (0 gate, 1 up, 2 down) the index array
    idx[M, nv, S] (int) and the f32 row scales; plus the codebook base."""

    __slots__ = ("idx", "scale", "cb", "dense")

    def __init__(self, idx, scale, cb):
        self.idx = idx
        self.scale = scale
        self.cb = cb
        self.dense = None


class Container:
    def __init__(self, path, verify_crc=False, warn=None):
        self.path = path
        self.verify_crc = verify_crc
        self.warn = warn or (lambda m: None)
        mp = os.path.join(path, "manifest.json")
        try:
            with open(mp, "rb") as f:
                raw = f.read()
        except OSError as e:
            raise FormatError("manifest.json unreadable: %s" % e)
        try:
            m = json.loads(raw.decode("utf-8"), object_pairs_hook=_first_wins)
        except ValueError as e:
            raise FormatError("manifest does not parse: %s" % e)
        if not isinstance(m, dict):
            raise FormatError("manifest is not an object")
        self.manifest = m
        fv = m.get("format_version")
        if not _is_num(fv) or int(math.trunc(float(fv))) != 0:
            raise FormatError("container format version missing/mismatch")
        self.prefix = jstr(m, "tensor_prefix", "")
        cfg = m.get("config")
        if not isinstance(cfg, dict):
            cfg = {}
        if isinstance(cfg.get("text_config"), dict):
            cfg = cfg["text_config"]
            if self.prefix == "":
                self.prefix = "language_model."
        self.cfg = Config(cfg, self.warn)
        self.eq = ExpertQuant(m.get("expert_quant"))
        self._check_rotary()
        self._open_trunk()
        self._open_codebooks()
        self._open_layers()
        self._records = {}

    # -- rotary checks (§3.6 / MODEL §4.3); the math lives in forward.py --
    def _check_rotary(self):
        c = self.cfg
        c.rope = None  # None => no rotation
        c.att_mul = 1.0
        if c.mla_use_nope or c.dr // 2 <= 0:
            return
        if c.dr // 2 > 64:
            raise FormatError("qk_rope_head_dim/2 > 64")
        rs = c.rope_scaling
        yarn = None
        if isinstance(rs, dict) and len(rs) > 0:
            t = jstr(rs, "type", None)
            if t is None:
                t = jstr(rs, "rope_type", None)
            if t != "yarn":
                raise FormatError("rope_scaling type must be \"yarn\"")
            factor = jnum(rs, "factor", 1.0)
            if factor > 1.0:
                mscale = jnum(rs, "mscale", 1.0)
                mscale_all = jnum(rs, "mscale_all_dim", 0.0)
                if mscale != mscale_all:
                    raise FormatError("rope_scaling mscale != mscale_all_dim is not implemented")
                yarn = dict(factor=factor, mscale_all_dim=mscale_all,
                            orig=jnum(rs, "original_max_position_embeddings", 4096.0),
                            beta_fast=jnum(rs, "beta_fast", 32.0),
                            beta_slow=jnum(rs, "beta_slow", 1.0))
        c.rope = {"theta": c.rope_theta, "yarn": yarn}

    # -- trunk (§3.5, §4) --
    def _open_trunk(self):
        tp = os.path.join(self.path, "trunk.bin")
        try:
            with open(tp, "rb") as f:
                self.trunk_bytes = f.read()
        except OSError as e:
            raise FormatError("trunk.bin unreadable: %s" % e)
        fs = len(self.trunk_bytes)
        tr = self.manifest.get("trunk")
        if not isinstance(tr, list):
            tr = []
        self.entries = {}
        for d in tr:
            if not isinstance(d, dict):
                continue
            e = TrunkEntry(d)
            if e.name in self.entries:
                continue  # first entry with a name wins
            if not (1 <= len(e.shape) <= 4) or e.group < 1 or not (0 <= e.off <= fs) \
                    or not (0 <= e.scale_off <= fs) or any(not (1 <= s <= 1 << 26) for s in e.shape) \
                    or e.numel > fs:
                raise FormatError("trunk entry out of bounds: %s" % e.name)
            self.entries[e.name] = e
        self._tcache = {}

    def has(self, name):
        return (self.prefix + name) in self.entries

    def entry(self, name):
        return self.entries.get(self.prefix + name)

    def tensor(self, name):
        """Dequantised f32 tensor (full name without prefix), shape as stored."""
        full = self.prefix + name
        if full in self._tcache:
            return self._tcache[full]
        e = self.entries.get(full)
        if e is None:
            raise FormatError("required tensor is missing: " + full)
        a = self._decode(e)
        self._tcache[full] = a
        return a

    def _decode(self, e):
        buf = self.trunk_bytes
        fs = len(buf)
        if e.fmt == 0:
            n = e.numel
            if e.off + 4 * n > fs:
                raise FormatError("short trunk payload: " + e.name)
            return np.frombuffer(buf, dtype="<f4", count=n, offset=e.off).astype(np.float32).reshape(e.shape)
        if e.fmt not in TRUNK_FMTS:
            raise FormatError("unsupported trunk fmt %d for %s" % (e.fmt, e.name))
        g = e.group
        if g % 8 != 0:
            raise FormatError("quantisation group %d not a multiple of 8: %s" % (g, e.name))
        N = e.shape[-1]
        rows = e.numel // N
        ng = -(-N // g)
        Np = ng * g
        if e.fmt == 2:
            rb = Np
        elif e.fmt == 3:
            rb = Np // 2
        else:
            rb = Np * 3 // 8 + 1
        if e.off + rows * rb > fs or e.scale_off + 2 * rows * ng > fs:
            raise FormatError("short trunk payload/scales: " + e.name)
        P = np.frombuffer(buf, dtype=np.uint8, count=rows * rb, offset=e.off).reshape(rows, rb)
        if e.fmt == 2:
            q = P.view(np.int8).astype(np.float32)
        elif e.fmt == 3:
            q = np.empty((rows, Np), dtype=np.float32)
            q[:, 0::2] = (P & 0x0F).astype(np.float32) - 8.0
            q[:, 1::2] = (P >> 4).astype(np.float32) - 8.0
        else:
            i = np.arange(Np)
            t = 3 * i
            B = t >> 3
            k = (t & 7).astype(np.uint16)
            P16 = P.astype(np.uint16)
            u = ((P16[:, B] >> k) | (P16[:, B + 1] << (8 - k))) & 7
            q = u.astype(np.float32) - 4.0
        sc = f16_exact(np.frombuffer(buf, dtype="<u2", count=rows * ng, offset=e.scale_off)).reshape(rows, ng)
        W = q.reshape(rows, ng, g) * sc[:, :, None]  # exact in f32 (11-bit * <=8-bit)
        W = W.reshape(rows, Np)[:, :N]
        return np.ascontiguousarray(W, dtype=np.float32).reshape(e.shape)

    def embed_row(self, tok):
        W = self.tensor("model.embed_tokens.weight")
        return W[tok].astype(np.float32)

    # -- codebooks (§5) --
    def _open_codebooks(self):
        p = os.path.join(self.path, "codebooks.bin")
        try:
            with open(p, "rb") as f:
                b = f.read()
        except OSError as e:
            raise FormatError("codebooks.bin unreadable: %s" % e)
        eq = self.eq
        CB = 16 + 2 * eq.Ne * eq.Vd
        n = len(b) // CB
        self.n_books = n
        if n == 0:
            self.books = np.zeros((0, eq.Ne, eq.Vd), np.float32)
            return
        arr = np.frombuffer(b, dtype=np.uint8, count=n * CB).reshape(n, CB)
        ent = arr[:, 16:].copy().view("<u2").reshape(n, eq.Ne, eq.Vd)
        self.books = f16_flush(ent).reshape(n, eq.Ne, eq.Vd)
        magic = arr[:, 0:4].copy().view("<u4").ravel()
        bad = int(np.sum(magic != 0x4B424357))
        if bad:
            self.warn("%d codebook record(s) without the WCBK magic (not checked by the engine)" % bad)

    # -- expert banks (§3.4, §6) --
    def _open_layers(self):
        c = self.cfg
        lay = self.manifest.get("layers")
        if not isinstance(lay, dict):
            lay = {}
        self.banks = {}
        for L in range(c.NL):
            ent = lay.get(str(L))
            if c.is_moe(L):
                if not isinstance(ent, dict):
                    raise FormatError("MoE layer %d has no bank entry" % L)
                fn = jstr(ent, "file", "")
                ex = jint(ent, "experts", 0)
                by = jint(ent, "bytes", 0)
                base = jint(ent, "codebook_base", -1)
                if ex != c.E or by <= 0 or by % ex != 0:
                    raise FormatError("bank entry of layer %d inconsistent" % L)
                if not (0 <= base and base + 3 * self.eq.S <= self.n_books and 3 * self.eq.S <= self.n_books):
                    raise FormatError("codebook_base of layer %d out of range" % L)
                if "/" in fn or ".." in fn or fn == "":
                    raise FormatError("bank file name of layer %d rejected: %r" % (L, fn))
                fp = os.path.join(self.path, fn)
                try:
                    fh = open(fp, "rb")
                except OSError as e:
                    raise FormatError("bank of layer %d unreadable: %s" % (L, e))
                self.banks[L] = dict(fh=fh, R=by // ex, base=base)
            elif ent is not None:
                raise FormatError("non-MoE layer %d has a bank entry" % L)

    def record(self, L, e):
        key = (L, e)
        r = self._records.get(key)
        if r is None:
            r = self._read_record(L, e)
            self._records[key] = r
        return r

    def _read_record(self, L, e):
        c, eq = self.cfg, self.eq
        bank = self.banks.get(L)

        def bad(why):
            raise FormatError("expert %d of layer %d: %s" % (e, L, why))
        if bank is None or not (0 <= e < c.E) or bank["R"] <= 0:
            bad("record header is not what the bank index describes")
        R = bank["R"]
        fh = bank["fh"]
        fh.seek(e * R)
        b = fh.read(R)
        if len(b) < R:
            bad("short read")
        h = np.frombuffer(b, dtype=np.uint8, count=48)
        u32 = lambda o: int(h[o:o + 4].copy().view("<u4")[0])
        u16 = lambda o: int(h[o:o + 2].copy().view("<u2")[0])
        magic, layer, eid, fmt = u32(0), u16(4), u16(6), int(h[8])
        cbid, lowrank, blocks = u16(10), u16(12), u32(16)
        goff, uoff, doff, coff, crc = u32(20), u32(24), u32(28), u32(32), u32(36)
        X, Im = c.X, c.Im
        ok = (magic == 0x50584557 and layer == L and eid == e and blocks * 4096 == R
              and (fmt == 8 if eq.IB == 6 else fmt in (4, 5)) and lowrank == 0
              and cbid + 3 * eq.S <= self.n_books
              and goff == 48 < uoff < doff < coff <= R
              and 2 * (2 * Im + X) <= R - coff)
        if not ok:
            bad("record header is not what the bank index describes")
        # spacing (SHOULD check, §6.3)
        shapes = ((Im, X), (Im, X), (X, Im))
        sizes = []
        for (M, N) in shapes:
            if N % eq.Vd != 0:
                bad("matrix width %d not a multiple of vec_dim" % N)
            sizes.append(-(-M // 64) * (N // eq.Vd) * 64 * eq.RL)
        if uoff != 48 + sizes[0] or doff != uoff + sizes[1] or coff != doff + sizes[2]:
            bad("matrix offsets are not consecutive")
        end = coff + 2 * (2 * Im + X)
        if self.verify_crc:
            if zlib.crc32(b[48:end]) & 0xFFFFFFFF != crc:
                bad("checksum mismatch")
        if cbid != bank["base"]:
            self.warn("layer %d expert %d: record codebook_id %d != manifest codebook_base %d "
                      "(engine decodes with the record's)" % (L, e, cbid, bank["base"]))
        buf = np.frombuffer(b, dtype=np.uint8)
        idxs = []
        for k, (M, N) in enumerate(shapes):
            off = (goff, uoff, doff)[k]
            nv = N // eq.Vd
            nb = -(-M // 64)
            raw = buf[off:off + sizes[k]].reshape(nb, nv, 64, eq.RL)
            raw = raw.transpose(0, 2, 1, 3).reshape(nb * 64, nv, eq.RL)[:M]
            if eq.IB == 8:
                idx = raw.astype(np.int32)
            else:
                w = raw[:, :, 0].astype(np.int32) | (raw[:, :, 1].astype(np.int32) << 8) \
                    | (raw[:, :, 2].astype(np.int32) << 16)
                idx = np.stack([(w >> (6 * s)) & 63 for s in range(4)], axis=-1)
            if idx.max(initial=0) >= eq.Ne:
                bad("codebook index >= entries")
            idxs.append(np.ascontiguousarray(idx))
        sc = f16_exact(buf[coff:end].copy().view("<u2"))
        scales = (sc[:Im], sc[Im:2 * Im], sc[2 * Im:2 * Im + X])
        return ExpertRecord(idxs, scales, cbid)

    def codebooks(self, cbid, kind):
        S = self.eq.S
        b = cbid + kind * S
        return self.books[b:b + S]  # [S, Ne, Vd]

    def dense(self, rec, kind):
        """Reconstruct W_kind (f64) from the record (§6.4)."""
        C = self.codebooks(rec.cb, kind).astype(np.float64)  # [S, Ne, Vd]
        idx = rec.idx[kind]  # [M, nv, S]
        M, nv, S = idx.shape
        acc = np.zeros((M, nv, self.eq.Vd), np.float64)
        for s in range(S):
            acc += C[s][idx[:, :, s]]
        return acc.reshape(M, nv * self.eq.Vd) * rec.scale[kind].astype(np.float64)[:, None]

    def close(self):
        for b in self.banks.values():
            try:
                b["fh"].close()
            except Exception:
                pass
