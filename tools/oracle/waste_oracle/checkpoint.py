"""A published checkpoint (safetensors, Hugging Face layout) seen through the
same interface as Container, so that Model runs the float model straight
from the source: the reference the converter's output is measured against
(KL divergence, top-1 agreement).

Written from the checkpoint facts in the converter's spec (safetensors
layout, bf16 / f16 / fp8 e4m3 with block scales / MXFP4 decoding, tensor
names per family, config key spellings), not from the C++ converter.
Routed experts are dense f64 matrices (no codebooks).

Int4 "pack-quantized" (compressed-tensors, Kimi-K2-Thinking) is decoded from
the format's description alone: W_packed I32 [rows, ceil(cols/8)], column c
in word c // 8 at bits 4*(c % 8) .. +3 holding q + 8, q in [-8, 7];
W_scale [rows, ceil(cols/group_size)] of any float dtype; W_shape = (rows,
cols); W = q * scale[row, c // group_size], symmetric (no zero point).
"""

import json
import math
import os
import struct

import numpy as np

from .container import Config, Container, ExpertQuant, FormatError

_E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def _e4m3_table():
    t = np.zeros(256, np.float32)
    for b in range(256):
        s, e, m = b >> 7, (b >> 3) & 15, b & 7
        if e == 15 and m == 7:
            v = float("nan")
        elif e == 0:
            v = (m / 8.0) * 2.0 ** -6
        else:
            v = (1 + m / 8.0) * 2.0 ** (e - 7)
        t[b] = -v if s else v
    return t


_E4M3 = _e4m3_table()


class _Shard:
    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            self.header = json.loads(f.read(n).decode("utf-8"))
        self.base = 8 + n

    def raw(self, name):
        h = self.header[name]
        b, e = h["data_offsets"]
        with open(self.path, "rb") as f:
            f.seek(self.base + b)
            data = f.read(e - b)
        if len(data) != e - b:
            raise FormatError("%s: tensor %s truncated" % (self.path, name))
        return h["dtype"], tuple(h["shape"]), data


def _to_f32(dtype, shape, data):
    if dtype == "F32":
        a = np.frombuffer(data, "<f4")
    elif dtype == "F16":
        a = np.frombuffer(data, "<f2").astype(np.float32)
    elif dtype == "BF16":
        a = (np.frombuffer(data, "<u2").astype(np.uint32) << 16).view(np.float32)
    elif dtype == "F8_E4M3":
        a = _E4M3[np.frombuffer(data, np.uint8)]
    elif dtype == "F8_E5M2":
        a = (np.frombuffer(data, np.uint8).astype(np.uint16) << 8).view(np.float16).astype(np.float32)
    elif dtype in ("U8", "I8"):
        a = np.frombuffer(data, np.uint8)
    else:
        raise FormatError("dtype %s is not readable as float" % dtype)
    return a.reshape(shape) if shape else a.reshape(1)


def int4_group_size(qc):
    """quantization_config -> the group size of a compressed-tensors
    pack-quantized int4 checkpoint, or None when it is not one. Schemes the
    decoder below does not implement are refused."""
    if not isinstance(qc, dict):
        return None
    groups = qc.get("config_groups") or {}
    formats = [qc.get("format")] + [g.get("format") for g in groups.values() if isinstance(g, dict)]
    if "pack-quantized" not in formats:
        return None
    sizes = set()
    for name, g in groups.items():
        w = g.get("weights")
        if w is None:
            continue
        want = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group"}
        for k, v in want.items():
            if w.get(k) != v:
                raise FormatError("config_groups.%s.weights.%s is %r, not %r" % (name, k, w.get(k), v))
        if w.get("actorder") not in (None, False):
            raise FormatError("config_groups.%s.weights.actorder %r" % (name, w.get("actorder")))
        gs = w.get("group_size")
        if not isinstance(gs, int) or isinstance(gs, bool) or gs < 1:
            raise FormatError("config_groups.%s.weights.group_size is %r" % (name, gs))
        sizes.add(gs)
    if len(sizes) != 1:
        raise FormatError("pack-quantized with group sizes %r" % sorted(sizes))
    return sizes.pop()


def int4_dequantize(pdtype, pshape, pdata, scale, shape, group):
    """Pack-quantized int4 -> f32 [rows, cols]. `scale` is the decoded f32
    scale array, `shape` the (rows, cols) of W_shape."""
    rows, cols = (int(v) for v in shape)
    words = -(-cols // 8)
    groups = -(-cols // group)
    if pdtype != "I32":
        raise FormatError("int4 codes must be I32, not %s" % pdtype)
    if tuple(pshape) != (rows, words):
        raise FormatError("packed shape %r, W_shape (%d, %d) needs (%d, %d)" % (pshape, rows, cols, rows, words))
    if scale.shape != (rows, groups):
        raise FormatError("scale shape %r, needs (%d, %d)" % (scale.shape, rows, groups))
    w = np.frombuffer(pdata, "<u4").reshape(rows, words)
    shifts = (4 * np.arange(8)).astype(np.uint32)
    nibbles = (w[:, :, None] >> shifts[None, None, :]) & np.uint32(15)  # [rows, words, 8]
    q = nibbles.reshape(rows, words * 8)[:, :cols].astype(np.int32) - 8  # padding cut off
    s = np.repeat(scale.astype(np.float32), group, axis=1)[:, :cols]
    return q.astype(np.float32) * s  # small integers times the scale: exact for bf16 scales


class _Entry:
    def __init__(self, shape):
        self.shape = tuple(shape)
        self.fmt = 0

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n


class _Record:
    def __init__(self, dense):
        self.dense = dense
        self.cb = None


def shard_map(path):
    """name -> _Shard for every tensor of the checkpoint at `path` (its
    index's weight_map, or the one model.safetensors)."""
    idx = os.path.join(path, "model.safetensors.index.json")
    where = {}
    if os.path.exists(idx):
        with open(idx) as f:
            wm = json.load(f)["weight_map"]
        shards = {}
        for name, shard in wm.items():
            if shard not in shards:
                shards[shard] = _Shard(os.path.join(path, shard))
            where[name] = shards[shard]
    else:
        s = _Shard(os.path.join(path, "model.safetensors"))
        for name in s.header:
            if name != "__metadata__":
                where[name] = s
    return where


class Checkpoint:
    def __init__(self, path, warn=None):
        self.path = path
        self.warn = warn or (lambda m: None)
        with open(os.path.join(path, "config.json")) as f:
            raw = json.load(f)
        self.prefix = ""
        cfg = raw
        if isinstance(raw.get("text_config"), dict):
            cfg = dict(raw["text_config"])
            self.prefix = "language_model."
        cfg = dict(cfg)
        # The engine's spellings, as a conversion writes them.
        for ours, theirs in (("num_experts", "n_routed_experts"),
                             ("num_experts_per_token", "num_experts_per_tok"),
                             ("num_shared_experts", "n_shared_experts")):
            if ours not in cfg and theirs in cfg:
                cfg[ours] = cfg[theirs]
        if cfg.get("norm_topk_prob") is True and "moe_renormalize" not in cfg:
            cfg["moe_renormalize"] = True
        qc = raw.get("quantization_config") or cfg.get("quantization_config") or {}
        self.block = tuple(qc.get("weight_block_size", (128, 128)))
        self.int4_group = int4_group_size(qc)
        self.cfg = Config(cfg, self.warn)
        self.eq = ExpertQuant({"stages": 3, "vec_dim": 8, "entries": 256, "index_bits": 8})
        Container._check_rotary(self)  # the same rotary rules as a container's config
        self.where = shard_map(path)
        self.deepseek = any(".mlp.experts." in n for n in self.where)
        self._cache = {}
        self._records = {}

    def _source(self, name):
        full = self.prefix + name
        if self.deepseek:
            for ours, theirs in ((".block_sparse_moe.shared_experts.", ".mlp.shared_experts."),
                                 (".block_sparse_moe.gate.", ".mlp.gate.")):
                full = full.replace(ours, theirs)
        return full

    def _load(self, full):
        if full in self._cache:
            return self._cache[full]
        if full in self.where:
            dtype, shape, data = self.where[full].raw(full)
            a = _to_f32(dtype, shape, data).astype(np.float32)
            sc = full + "_scale_inv"
            if sc in self.where:
                sd, ss, sdata = self.where[sc].raw(sc)
                s = _to_f32(sd, ss, sdata)
                bm, bn = self.block
                rows = np.arange(a.shape[0]) // bm
                cols = np.arange(a.shape[1]) // bn
                a = a * s[rows][:, cols]
        elif full + "_packed" in self.where and self.int4_group is not None:
            pdtype, pshape, pdata = self.where[full + "_packed"].raw(full + "_packed")
            sd, ss, sdata = self.where[full + "_scale"].raw(full + "_scale")
            hd, _, hdata = self.where[full + "_shape"].raw(full + "_shape")
            shape = np.frombuffer(hdata, "<i4" if hd == "I32" else "<i8")
            a = int4_dequantize(pdtype, pshape, pdata, _to_f32(sd, ss, sdata), shape, self.int4_group)
        elif full + "_packed" in self.where:
            _, shape, pdata = self.where[full + "_packed"].raw(full + "_packed")
            _, sshape, sdata = self.where[full + "_scale"].raw(full + "_scale")
            p = np.frombuffer(pdata, np.uint8).reshape(shape)
            e = np.frombuffer(sdata, np.uint8).reshape(sshape).astype(np.int32)
            codes = np.empty((shape[0], shape[1] * 2), np.uint8)
            codes[:, 0::2] = p & 15
            codes[:, 1::2] = p >> 4
            scale = np.where(e == 0, 0.0, np.ldexp(1.0, e - 127)).astype(np.float32)
            a = _E2M1[codes] * np.repeat(scale, 32, axis=1)
        else:
            raise FormatError("required tensor is missing: " + full)
        self._cache[full] = a
        return a

    # -- the Container interface Model uses --
    def has(self, name):
        full = self._source(name)
        return full in self.where or full + "_packed" in self.where

    def entry(self, name):
        full = self._source(name)
        if full not in self.where:
            if full + "_packed" in self.where:
                return _Entry(self._load(full).shape)
            return None
        return _Entry(self.where[full].header[full]["shape"] or [1])

    def tensor(self, name):
        return self._load(self._source(name))

    def embed_row(self, tok):
        return self.tensor("model.embed_tokens.weight")[tok].astype(np.float32)

    def record(self, L, e):
        key = (L, e)
        if key not in self._records:
            if self.deepseek:
                names = ["model.layers.%d.mlp.experts.%d.%s.weight" % (L, e, k)
                         for k in ("gate_proj", "up_proj", "down_proj")]
            else:
                names = ["model.layers.%d.block_sparse_moe.experts.%d.%s.weight" % (L, e, k)
                         for k in ("w1", "w3", "w2")]
            self._records[key] = _Record([self._load(self.prefix + n).astype(np.float64) for n in names])
        return self._records[key]

    def close(self):
        pass
