"""Kimi-Linear in PyTorch, written for training the demo model.

The arithmetic follows the engine's model description (docs/ and the
project's model notes): KDA layers with short convolutions, the softplus
decay gate, the delta-rule recurrence (decay first, read after the update)
and the sigmoid-gated output norm; MLA without rotary embedding
(`mla_use_nope`); a sigmoid router whose correction bias only selects,
unbiased scores as weights, renormalised then scaled; a shared expert; a
dense first layer. Parameter names are the published checkpoint's names,
so `state_dict()` is the checkpoint.

The KDA recurrence runs token by token (as the engine does); at the demo's
size that is fast enough on a CPU and keeps the code obviously equal to the
engine's maths.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        return rms_norm(x, self.weight, self.eps)


def linear(n_in, n_out):
    return nn.Linear(n_in, n_out, bias=False)


def kda_recurrent(q, k, v, g, beta):
    """The engine's recurrence, token by token. q, k normalised; g log-decay.
    Shapes [B,T,H,D] (beta [B,T,H]); returns o [B,T,H,D]."""
    B, T, H, D = q.shape
    decay = torch.exp(g)
    S = q.new_zeros(B, H, D, D)                                     # [key i, value j]
    outs = []
    for t in range(T):
        S = S * decay[:, t].unsqueeze(-1)                           # decay first
        kt = k[:, t]
        u = torch.einsum("bhij,bhi->bhj", S, kt)
        delta = beta[:, t].unsqueeze(-1) * (v[:, t] - u)
        S = S + kt.unsqueeze(-1) * delta.unsqueeze(-2)
        outs.append(torch.einsum("bhij,bhi->bhj", S, q[:, t]))      # read after update
    return torch.stack(outs, 1)


def kda_chunked(q, k, v, g, beta, C):
    """Same recurrence, C tokens at a time (exact algebra, different rounding).

    Within a chunk, with G_t = sum of g up to t (per key channel) and S0 the
    state entering the chunk, the deltas solve the unit lower-triangular
    system  delta_t + beta_t * sum_{s<t} A_ts delta_s = beta_t (v_t - (e^G_t * k_t) S0),
    A_ts = sum_i k_t[i] k_s[i] e^(G_t[i]-G_s[i]); then
    o_t = (e^G_t * q_t) S0 + sum_{s<=t} Q_ts delta_s, Q_ts likewise with q_t,
    and the state leaving is e^G_C * S0 + sum_s (e^(G_C-G_s) * k_s) delta_s^T.
    Only the exponent differences with s <= t are formed (they are <= 0)."""
    B, T, H, D = q.shape
    N = T // C
    # [B,H,N,C,D]
    rs = lambda x: x.view(B, N, C, H, -1).permute(0, 3, 1, 2, 4)
    q, k, v, g = rs(q), rs(k), rs(v), rs(g)
    beta = beta.view(B, N, C, H).permute(0, 3, 1, 2)                # [B,H,N,C]
    G = torch.cumsum(g, dim=3)
    diff = G.unsqueeze(4) - G.unsqueeze(3)                          # [B,H,N,t,s,D]
    incl = torch.ones(C, C, dtype=torch.bool, device=q.device).tril()
    diff = diff.masked_fill(~incl.view(1, 1, 1, C, C, 1), float("-inf"))
    E = torch.exp(diff)
    A = torch.einsum("bhntd,bhnsd,bhntsd->bhnts", k, k, E)
    Qm = torch.einsum("bhntd,bhnsd,bhntsd->bhnts", q, k, E)
    strict = torch.ones(C, C, dtype=torch.bool, device=q.device).tril(-1)
    L = torch.eye(C, device=q.device) + (beta.unsqueeze(-1) * A).masked_fill(~strict, 0.0)
    eG = torch.exp(G)
    rhs = torch.cat([beta.unsqueeze(-1) * v, beta.unsqueeze(-1) * (eG * k)], dim=-1)
    sol = torch.linalg.solve_triangular(L, rhs, upper=False, unitriangular=True)
    U, W = sol[..., :D], sol[..., D:]                               # delta = U - W S0
    qg = eG * q
    kend = torch.exp(G[:, :, :, -1:, :] - G) * k                    # e^(G_C - G_s) k_s
    dend = eG[:, :, :, -1, :]                                       # [B,H,N,D]
    S = q.new_zeros(B, H, D, D)
    outs = []
    for n in range(N):
        delta = U[:, :, n] - W[:, :, n] @ S                         # [B,H,C,D]
        outs.append(qg[:, :, n] @ S + Qm[:, :, n] @ delta)
        S = dend[:, :, n].unsqueeze(-1) * S + kend[:, :, n].transpose(-1, -2) @ delta
    o = torch.stack(outs, 2)                                        # [B,H,N,C,D]
    return o.permute(0, 2, 3, 1, 4).reshape(B, T, H, D)


class KDA(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        la = cfg["linear_attn_config"]
        d, self.H, self.D = cfg["hidden_size"], la["num_heads"], la["head_dim"]
        self.Kc = la["short_conv_kernel_size"]
        C = self.H * self.D
        self.eps = cfg["rms_norm_eps"]
        self.q_proj, self.k_proj, self.v_proj = linear(d, C), linear(d, C), linear(d, C)
        self.q_conv1d = nn.Conv1d(C, C, self.Kc, groups=C, bias=False)
        self.k_conv1d = nn.Conv1d(C, C, self.Kc, groups=C, bias=False)
        self.v_conv1d = nn.Conv1d(C, C, self.Kc, groups=C, bias=False)
        self.f_a_proj, self.f_b_proj = linear(d, self.D), linear(self.D, C)
        self.A_log = nn.Parameter(torch.log(torch.empty(1, 1, self.H, 1).uniform_(1, 16)))
        dt = torch.exp(torch.empty(C).uniform_(math.log(1e-3), math.log(1e-1)))
        self.dt_bias = nn.Parameter(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1
        self.b_proj = linear(d, self.H)
        self.g_a_proj, self.g_b_proj = linear(d, self.D), linear(self.D, C)
        self.o_norm = RMSNorm(self.D, self.eps)
        self.o_proj = linear(C, d)
        self.chunk = 16  # training speed only; 0 = token-by-token

    def conv(self, u, conv):
        # Causal depthwise conv; tap K-1 multiplies the current token.
        y = F.conv1d(F.pad(u.transpose(1, 2), (self.Kc - 1, 0)), conv.weight,
                     groups=u.shape[-1])
        return F.silu(y.transpose(1, 2))

    def forward(self, x):
        B, T, _ = x.shape
        H, D = self.H, self.D
        q = self.conv(self.q_proj(x), self.q_conv1d).view(B, T, H, D)
        k = self.conv(self.k_proj(x), self.k_conv1d).view(B, T, H, D)
        v = self.conv(self.v_proj(x), self.v_conv1d).view(B, T, H, D)
        z = self.f_b_proj(self.f_a_proj(x)) + self.dt_bias
        a = torch.exp(self.A_log.reshape(-1)[:H]).view(1, 1, H, 1)
        g = -a * F.softplus(z.view(B, T, H, D))
        beta = torch.sigmoid(self.b_proj(x))                       # [B,T,H]
        q = q * torch.rsqrt(q.pow(2).sum(-1, keepdim=True) + 1e-12) * (D ** -0.5)
        k = k * torch.rsqrt(k.pow(2).sum(-1, keepdim=True) + 1e-12)
        if self.chunk > 0 and T % self.chunk == 0:
            o = kda_chunked(q, k, v, g, beta, self.chunk)
        else:
            o = kda_recurrent(q, k, v, g, beta)
        gate = self.g_b_proj(self.g_a_proj(x)).view(B, T, H, D)
        o = self.o_norm(o) * torch.sigmoid(gate)
        return self.o_proj(o.reshape(B, T, H * D))


class MLA(nn.Module):
    """Multi-head latent attention, NoPE (no rotary), single q_proj."""

    def __init__(self, cfg):
        super().__init__()
        d = cfg["hidden_size"]
        self.nh = cfg["num_attention_heads"]
        self.dn, self.dr = cfg["qk_nope_head_dim"], cfg["qk_rope_head_dim"]
        self.dv, self.rkv = cfg["v_head_dim"], cfg["kv_lora_rank"]
        self.q_proj = linear(d, self.nh * (self.dn + self.dr))
        self.kv_a_proj_with_mqa = linear(d, self.rkv + self.dr)
        self.kv_a_layernorm = RMSNorm(self.rkv, cfg["rms_norm_eps"])
        self.kv_b_proj = linear(self.rkv, self.nh * (self.dn + self.dv))
        self.o_proj = linear(self.nh * self.dv, d)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.nh, self.dn + self.dr)
        kv = self.kv_a_proj_with_mqa(x)
        c = self.kv_a_layernorm(kv[..., :self.rkv])
        kr = kv[..., self.rkv:]                                     # [B,T,dr]
        kvb = self.kv_b_proj(c).view(B, T, self.nh, self.dn + self.dv)
        k_nope, v = kvb[..., :self.dn], kvb[..., self.dn:]
        scale = 1.0 / math.sqrt(self.dn + self.dr)
        s = (torch.einsum("bthd,bshd->bhts", q[..., :self.dn], k_nope)
             + torch.einsum("bthd,bsd->bhts", q[..., self.dn:], kr)) * scale
        mask = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)
        s = s.masked_fill(mask, float("-inf"))
        o = torch.einsum("bhts,bshd->bthd", torch.softmax(s, -1), v)
        return self.o_proj(o.reshape(B, T, self.nh * self.dv))


class MLP(nn.Module):
    def __init__(self, d, f):
        super().__init__()
        self.gate_proj, self.up_proj, self.down_proj = linear(d, f), linear(d, f), linear(f, d)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Expert(nn.Module):
    """HF names: w1 = gate, w3 = up, w2 = down."""

    def __init__(self, d, f):
        super().__init__()
        self.w1, self.w3, self.w2 = linear(d, f), linear(d, f), linear(f, d)

    def forward(self, x):
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class Router(nn.Module):
    def __init__(self, d, E):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(E, d))
        # Selection-only bias, moved by the load balancer, not by gradients.
        self.register_buffer("e_score_correction_bias", torch.zeros(E))


class MoE(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        d, f = cfg["hidden_size"], cfg["moe_intermediate_size"]
        self.E, self.K = cfg["num_experts"], cfg["num_experts_per_token"]
        self.scale = cfg["routed_scaling_factor"]
        self.renorm = cfg.get("moe_renormalize", False)
        self.gate = Router(d, self.E)
        self.experts = nn.ModuleList(Expert(d, f) for _ in range(self.E))
        self.shared_experts = MLP(d, f * max(1, cfg["num_shared_experts"]))
        self.last_load = None

    def forward(self, x):
        shape = x.shape
        xf = x.reshape(-1, shape[-1])
        s = torch.sigmoid(F.linear(xf, self.gate.weight))
        sel = s.detach() + self.gate.e_score_correction_bias
        idx = torch.topk(sel, self.K, dim=-1).indices               # [N,K]
        w = torch.gather(s, 1, idx)
        if self.renorm and self.K > 1:
            w = w / (w.sum(-1, keepdim=True) + 1e-20)
        w = w * self.scale
        self.last_load = torch.bincount(idx.reshape(-1), minlength=self.E).float()
        y = torch.zeros_like(xf)
        for e in range(self.E):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            if tok.numel() == 0:
                continue
            y.index_add_(0, tok, w[tok, slot].unsqueeze(-1) * self.experts[e](xf[tok]))
        return (y + self.shared_experts(xf)).view(shape)


class Layer(nn.Module):
    def __init__(self, cfg, L):
        super().__init__()
        d, eps = cfg["hidden_size"], cfg["rms_norm_eps"]
        kda = (L + 1) in cfg["linear_attn_config"]["kda_layers"]
        self.self_attn = KDA(cfg) if kda else MLA(cfg)
        self.input_layernorm = RMSNorm(d, eps)
        self.post_attention_layernorm = RMSNorm(d, eps)
        if cfg["num_experts"] > 0 and L >= cfg["first_k_dense_replace"]:
            self.block_sparse_moe = MoE(cfg)
        else:
            self.mlp = MLP(d, cfg["intermediate_size"])

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        h = self.post_attention_layernorm(x)
        ffn = self.block_sparse_moe if hasattr(self, "block_sparse_moe") else self.mlp
        return x + ffn(h)


class Body(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList(Layer(cfg, L) for L in range(cfg["num_hidden_layers"]))
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class KimiLinear(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Body(cfg)
        self.lm_head = linear(cfg["hidden_size"], cfg["vocab_size"])
        self.reset_parameters()

    def reset_parameters(self):
        std = 0.02
        out_std = std / math.sqrt(2 * self.cfg["num_hidden_layers"])
        for name, p in self.named_parameters():
            if name.endswith("A_log") or name.endswith("dt_bias") or "norm" in name:
                continue
            if "conv1d" in name:
                continue  # PyTorch's default conv init
            if name.endswith(("o_proj.weight", "down_proj.weight", "w2.weight")):
                nn.init.normal_(p, 0.0, out_std)
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, ids):
        x = self.model.embed_tokens(ids)
        for layer in self.model.layers:
            x = layer(x)
        return self.lm_head(self.model.norm(x))

    def moe_blocks(self):
        return [l.block_sparse_moe for l in self.model.layers if hasattr(l, "block_sparse_moe")]
