#!/usr/bin/python3
"""Independent numpy model of the K3 vision tower (written from the
project's description in docs/VISION.md, not from the C++): raw RGB8 pixels
-> patch grid, resample, normalise -> encoder -> 2x2 merge -> projector.
Float64 throughout except the resample, which follows the float32 recipe.

usage: vision_oracle.py CONTAINER RGB_FILE WIDTH HEIGHT OUT_F32
RGB_FILE holds WIDTH*HEIGHT*3 bytes (rows top to bottom). OUT_F32 gets the
projected rows [(gh/2)(gw/2)][H] as little-endian f32; the grid goes to
stdout as "GH GW".
"""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from waste_oracle.container import Container  # noqa: E402


def grid_for(sw, sh, m):
    s = min(math.sqrt(m / (sw * sh / 196.0)), 1.0)
    gw = max(int(sw * s / 14.0 + 0.5), 2) & ~1
    gh = max(int(sh * s / 14.0 + 0.5), 2) & ~1
    while gw * gh > m and (gw > 2 or gh > 2):
        if gw >= gh and gw > 2:
            gw -= 2
        elif gh > 2:
            gh -= 2
        else:
            break
    return gh, gw


def patches(rgb, sw, sh, gh, gw, mean, std):
    f = np.float32
    W, H = 14 * gw, 14 * gh
    rx, ry = f(sw) / f(W), f(sh) / f(H)
    X = np.arange(W, dtype=np.float32)
    Y = np.arange(H, dtype=np.float32)
    fx = (X + f(0.5)) * rx - f(0.5)
    fy = (Y + f(0.5)) * ry - f(0.5)
    x0 = np.floor(fx)
    y0 = np.floor(fy)
    wx = (fx - x0).astype(np.float32)
    wy = (fy - y0).astype(np.float32)
    xa = np.clip(x0.astype(int), 0, sw - 1)
    xb = np.clip(x0.astype(int) + 1, 0, sw - 1)
    ya = np.clip(y0.astype(int), 0, sh - 1)
    yb = np.clip(y0.astype(int) + 1, 0, sh - 1)
    S = rgb.astype(np.float32)
    one = f(1.0)
    wxc = wx[None, :, None]
    wyc = wy[:, None, None]
    top = (one - wxc) * S[ya][:, xa] + wxc * S[ya][:, xb]
    bot = (one - wxc) * S[yb][:, xa] + wxc * S[yb][:, xb]
    v = (one - wyc) * top + wyc * bot
    v = v / f(255.0)
    p = (v - np.array(mean, np.float32)) / np.array(std, np.float32)  # [H][W][3]
    out = p.reshape(gh, 14, gw, 14, 3).transpose(0, 2, 4, 1, 3).reshape(gh * gw, 588)
    return out.astype(np.float64)


def rms(x, w, eps):
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def main(argv):
    cdir, rgb_path, sw, sh, out = argv[1], argv[2], int(argv[3]), int(argv[4]), argv[5]
    ct = Container(cdir)
    vj = json.load(open(os.path.join(cdir, "vision.json")))
    D, A, Q = vj["vt_hidden_size"], vj["vt_num_attention_heads"], vj["qkv_hidden_size"]
    N, Ph, Pw = vj["vt_num_hidden_layers"], vj["init_pos_emb_height"], vj["init_pos_emb_width"]
    M = vj["max_patches"]
    mean = vj.get("image_mean", [0.5] * 3)
    std = vj.get("image_std", [0.5] * 3)
    d = Q // A

    def t(name):
        return ct._decode(ct.entries[name]).astype(np.float64)

    rgb = np.frombuffer(open(rgb_path, "rb").read(), np.uint8).reshape(sh, sw, 3)
    gh, gw = grid_for(sw, sh, M)
    L = gh * gw
    x = patches(rgb, sw, sh, gh, gw, mean, std) @ t("vision_tower.patch_embed.proj.weight").reshape(D, 588).T
    G = t("vision_tower.patch_embed.pos_emb.weight").reshape(Ph, Pw, D)
    pos = np.zeros((gh, gw, D))
    for y in range(gh):
        fy = (y + 0.5) * Ph / gh - 0.5
        y0 = math.floor(fy)
        wy = fy - y0
        for xx in range(gw):
            fx = (xx + 0.5) * Pw / gw - 0.5
            x0 = math.floor(fx)
            wx = fx - x0
            c = lambda v, n: min(max(v, 0), n - 1)  # noqa: E731
            pos[y, xx] = ((1 - wy) * (1 - wx) * G[c(y0, Ph), c(x0, Pw)] +
                          (1 - wy) * wx * G[c(y0, Ph), c(x0 + 1, Pw)] +
                          wy * (1 - wx) * G[c(y0 + 1, Ph), c(x0, Pw)] +
                          wy * wx * G[c(y0 + 1, Ph), c(x0 + 1, Pw)])
    x = x + pos.reshape(L, D)

    cx = np.arange(L) % gw
    cy = np.arange(L) // gw
    j = np.arange(d // 2)
    freq = 1.0 / 10000.0 ** (4 * (j // 2) / d)
    theta = np.where(j % 2 == 0, cx[:, None], cy[:, None]) * freq[None, :]  # [L][d/2]
    cos, sin = np.cos(theta), np.sin(theta)

    def rope(v):  # [L][A][d]
        a, b = v[..., 0::2], v[..., 1::2]
        r = np.empty_like(v)
        r[..., 0::2] = a * cos[:, None, :] - b * sin[:, None, :]
        r[..., 1::2] = a * sin[:, None, :] + b * cos[:, None, :]
        return r

    eps = 2.0 ** -23
    gelu_tanh = lambda u: 0.5 * u * (1 + np.tanh(0.7978845608028654 * (u + 0.044715 * u ** 3)))  # noqa: E731
    for b in range(N):
        p = "vision_tower.encoder.blocks.%d." % b
        h = rms(x, t(p + "norm0.weight"), eps)
        qkv = h @ t(p + "wqkv.weight").reshape(3 * Q, D).T
        q = rope(qkv[:, :Q].reshape(L, A, d))
        k = rope(qkv[:, Q:2 * Q].reshape(L, A, d))
        v = qkv[:, 2 * Q:].reshape(L, A, d)
        s = np.einsum("iad,jad->aij", q, k) / math.sqrt(d)
        s = np.exp(s - s.max(axis=-1, keepdims=True))
        s /= s.sum(axis=-1, keepdims=True)
        o = np.einsum("aij,jad->iad", s, v).reshape(L, Q)
        x = x + o @ t(p + "wo.weight").reshape(D, Q).T
        h = rms(x, t(p + "norm1.weight"), eps)
        u = gelu_tanh(h @ t(p + "mlp.fc0.weight").reshape(-1, D).T)
        x = x + u @ t(p + "mlp.fc1.weight").reshape(D, -1).T
    y = rms(x, t("vision_tower.encoder.final_layernorm.weight"), eps).reshape(gh, gw, D)
    m = np.concatenate([y[0::2, 0::2], y[0::2, 1::2], y[1::2, 0::2], y[1::2, 1::2]], axis=-1)
    m = m.reshape(-1, 4 * D)
    u = m @ t("mm_projector.proj.0.weight").reshape(4 * D, 4 * D).T
    erf = np.vectorize(math.erf)
    u = 0.5 * u * (1 + erf(u / math.sqrt(2)))
    e = u @ t("mm_projector.proj.2.weight").reshape(-1, 4 * D).T
    e = rms(e, t("mm_projector.post_norm.weight"), 1e-5)
    e.astype("<f4").tofile(out)
    print(gh, gw)


if __name__ == "__main__":
    main(sys.argv)
