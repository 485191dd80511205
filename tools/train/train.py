#!/usr/bin/python3
"""Trains the demo model and writes it as a published Kimi-Linear checkpoint.

Steps (all deterministic for a given seed and thread count):
  1. corpus.py builds train/heldout/chat text from the King James Bible;
  2. bpe_train.py learns the byte-level BPE ranks (tiktoken.model);
  3. the corpus is tokenized with the project's reference tokenizer
     (tools/tokenizer_ref.py: Kimi's pre-tokenizer pattern + tiktoken BPE);
  4. the model (kimi_linear.py) starts from a bigram fit of the embedding
     and lm_head (init_from_bigrams), then trains on random windows with AdamW;
  5. export.py writes config.json, bf16 safetensors shards + index,
     tiktoken.model, tokenizer_config.json, and eval.json (held-out ids,
     float perplexity, greedy continuations) measured on the bf16 weights.

Usage: train.py OUT_DIR [--steps N] [--threads N] [--work DIR]

The shipped demo-model/ is `train.py demo-model` with the defaults (120
steps, batch 8 x 128 tokens, peak lr 1.5e-3, one thread, seed 1611).
The work directory caches the tokenized corpus (stream.pt) and the BPE
ranks; delete it to rebuild them.
"""

import argparse
import json
import math
import os
import random
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import export  # noqa: E402
import kimi_linear  # noqa: E402
import tokenizer_ref  # noqa: E402

N_RANKS = 4032   # BPE ranks; the 64 ids after them are the special block
VOCAB = 4096

CONFIG = {
    "num_hidden_layers": 4,
    "hidden_size": 128,
    "vocab_size": VOCAB,
    "rms_norm_eps": 1e-5,
    "first_k_dense_replace": 1,
    "intermediate_size": 256,
    "moe_intermediate_size": 64,
    "num_experts": 16,
    "num_experts_per_token": 2,
    "num_shared_experts": 1,
    "moe_renormalize": True,
    "routed_scaling_factor": 2.446,
    "num_attention_heads": 2,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16,
    "v_head_dim": 32,
    "kv_lora_rank": 64,
    "q_lora_rank": None,
    "mla_use_nope": True,
    "linear_attn_config": {
        "num_heads": 2,
        "head_dim": 64,
        "short_conv_kernel_size": 4,
        "kda_layers": [1, 2, 3],
        "full_attn_layers": [4],
    },
}

PROMPTS = ["And it came to pass", "In the beginning", "And the king said",
           "Blessed are the"]


def tokenize_corpus(work, ranks, specials):
    cache = {}

    def plain(text):
        ids = []
        for piece in tokenizer_ref.pre_tokenize(text.encode()):
            r = cache.get(piece)
            if r is None:
                r = cache[piece] = tokenizer_ref.bpe(ranks, piece)
            ids.extend(r)
        return ids

    docs = []
    with open(os.path.join(work, "train.txt")) as f:
        for para in f.read().split("\n\n"):
            if para.strip():
                docs.append(plain(para.strip() + "\n\n"))
    with open(os.path.join(work, "chat.txt")) as f:
        for conv in f.read().splitlines():
            if conv:
                docs.append(tokenizer_ref.encode_markup(ranks, specials, conv.encode()))
    return docs


@torch.no_grad()
def init_from_bigrams(model, stream, vocab):
    """Starts the embedding and lm_head from the corpus's bigram statistics.

    The CPU this model was trained on gave it minutes, not hours, so the
    token-to-next-token map is fitted in closed form first: the centred log
    of an interpolated bigram distribution (bigram weight c/(c+5) for a token
    seen c times, unigram otherwise) is factorised at the hidden width with a
    randomised SVD, L ~ A B^T; embedding rows = A (scaled to unit RMS), lm_head
    = B times the mean row norm of A over sqrt(d) (the final RMSNorm removes
    each row's own norm). The layers start near zero, so the untrained model
    already is this bigram model; gradient steps then train everything.
    """
    V = vocab
    d = model.cfg["hidden_size"]
    pairs = stream[:-1] * V + stream[1:]
    counts = torch.bincount(pairs, minlength=V * V).view(V, V).float()
    uni = torch.bincount(stream, minlength=V).float() + 0.5
    uni = uni / uni.sum()
    row = counts.sum(1, keepdim=True)
    lam = row / (row + 5.0)
    p = lam * counts / row.clamp(min=1) + (1 - lam) * uni
    L = torch.log(p)
    L = L - L.mean(1, keepdim=True)
    torch.manual_seed(0)
    U, S, Vt = torch.svd_lowrank(L, q=d, niter=2)
    A = U * S.sqrt()
    Bm = Vt * S.sqrt()
    norms = A.norm(dim=1)
    model.model.embed_tokens.weight.copy_(A / (norms.unsqueeze(1) / math.sqrt(d)).clamp(min=1e-6))
    model.lm_head.weight.copy_(Bm * norms.mean() / math.sqrt(d))


def lr_at(step, steps, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    t = (step - warmup) / max(1, steps - warmup)
    return peak * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--steps", type=int, default=120)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--lr", type=float, default=1.5e-3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=1611)
    ap.add_argument("--work", default="/tmp/waste-demo-train")
    ap.add_argument("--minutes", type=float, default=0,
                    help="stop after this much training wall time (0 = run every step)")
    ap.add_argument("--bench", action="store_true", help="time 5 steps and exit")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    random.seed(args.seed)
    os.makedirs(args.work, exist_ok=True)
    os.makedirs(args.out_dir, exist_ok=True)

    subprocess.run([sys.executable, os.path.join(HERE, "corpus.py"), args.work,
                    "--seed", str(args.seed)], check=True)
    tik = os.path.join(args.work, "tiktoken.model")
    if not os.path.exists(tik):
        subprocess.run([sys.executable, os.path.join(HERE, "bpe_train.py"),
                        os.path.join(args.work, "train.txt"), tik,
                        "--ranks", str(N_RANKS)], check=True)
    ranks = export.load_ranks(tik)
    assert len(ranks) == N_RANKS, len(ranks)
    specials = {s.encode(): i for i, s in export.special_tokens(N_RANKS).items()}
    cached = os.path.join(args.work, "stream.pt")
    if os.path.exists(cached):
        stream = torch.load(cached)
    else:
        docs = tokenize_corpus(args.work, ranks, specials)
        random.Random(args.seed).shuffle(docs)
        stream = torch.tensor([t for d in docs for t in d], dtype=torch.long)
        torch.save(stream, cached)
    print(f"corpus: {stream.numel()} tokens", flush=True)

    cfg = dict(CONFIG)
    model = kimi_linear.KimiLinear(cfg)
    t_init = time.time()
    init_from_bigrams(model, stream, VOCAB)
    init_seconds = time.time() - t_init
    print(f"bigram initialisation: {init_seconds:.1f}s", flush=True)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f} M parameters", flush=True)
    decay, no_decay = [], []
    for n, p in model.named_parameters():
        (no_decay if p.dim() < 2 or "norm" in n else decay).append(p)
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(args.seed)
    steps = 5 if args.bench else args.steps
    warmup = min(20, steps // 10 + 1)
    curve = []
    t0 = time.time()
    run_loss, run_n = 0.0, 0
    for step in range(steps):
        starts = torch.randint(0, stream.numel() - args.seq - 1, (args.batch,), generator=gen)
        batch = torch.stack([stream[s:s + args.seq + 1] for s in starts.tolist()])
        for group in opt.param_groups:
            group["lr"] = lr_at(step, steps, args.lr, warmup)
        logits = model(batch[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), batch[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        # Auxiliary-loss-free balancing: raise the bias of under-used experts.
        with torch.no_grad():
            for moe in model.moe_blocks():
                load = moe.last_load
                moe.gate.e_score_correction_bias += 1e-3 * torch.sign(load.mean() - load)
        run_loss += loss.item()
        run_n += 1
        if args.bench:
            print(f"step {step} loss {loss.item():.3f} {time.time() - t0:.1f}s", flush=True)
            continue
        if (step + 1) % 5 == 0 or step == steps - 1:
            avg = run_loss / run_n
            curve.append({"step": step + 1, "loss": round(avg, 4),
                          "seconds": round(time.time() - t0, 1)})
            print(f"step {step + 1}/{steps} loss {avg:.4f} lr {opt.param_groups[0]['lr']:.2e} "
                  f"{time.time() - t0:.0f}s", flush=True)
            run_loss, run_n = 0.0, 0
        if args.minutes > 0 and time.time() - t0 > args.minutes * 60:
            print(f"wall-time limit reached after {step + 1} steps", flush=True)
            steps = step + 1
            break
        if (step + 1) % 10 == 0:
            torch.save(model.state_dict(), os.path.join(args.work, "ckpt.pt"))
    if args.bench:
        return
    train_seconds = time.time() - t0
    torch.save(model.state_dict(), os.path.join(args.work, "ckpt.pt"))
    meta = {"steps": steps, "planned_steps": args.steps, "batch": args.batch, "seq": args.seq, "lr": args.lr,
            "threads": args.threads, "seed": args.seed, "tokens": stream.numel(),
            "params": n_params, "init_seconds": round(init_seconds, 1),
            "train_seconds": round(train_seconds, 1), "curve": curve}
    with open(os.path.join(args.work, "train_meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
    export.export(model, cfg, tik, args.out_dir, args.work, PROMPTS, meta)


if __name__ == "__main__":
    main()
