#!/usr/bin/python3
"""Writes the trained demo model in the published Kimi-Linear layout.

Files: config.json (the release's keys), model-0000{1,2}-of-00002.safetensors
(bf16 matrices; A_log, dt_bias and the router's correction bias in f32, as
upstream ships small parameters), model.safetensors.index.json,
tiktoken.model, tokenizer_config.json (special tokens + chat template), and
eval.json: the held-out passage's token ids, the float model's perplexity on
them and its greedy continuations of a few prompts, all measured with the
bf16-rounded weights in f32 arithmetic (the exact values the converter
starts from).

Standalone: export.py CKPT.pt TIKTOKEN OUT_DIR [--work DIR]  (re-exports a
saved state dict without training).
"""

import argparse
import base64
import json
import math
import os
import shutil
import struct
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, ".."))
import kimi_linear  # noqa: E402
import tokenizer_ref  # noqa: E402

F32_SUFFIXES = ("A_log", "dt_bias", "e_score_correction_bias")
GREEDY_TOKENS = 16

# Kimi's special block, in its order, right after the BPE ranks:
# BOS = first id after the ranks, <|im_end|> = BOS + 2 (the end of turn).
_SPECIAL_LAYOUT = {
    0: "[BOS]", 1: "[EOS]", 2: "<|im_end|>", 3: "<|im_user|>", 4: "<|im_assistant|>",
    6: "<|start_header_id|>", 7: "<|end_header_id|>", 9: "[EOT]", 10: "<|im_system|>",
    11: "<|tool_calls_section_begin|>", 12: "<|tool_calls_section_end|>",
    13: "<|tool_call_begin|>", 14: "<|tool_call_argument_begin|>", 15: "<|tool_call_end|>",
    16: "<|tool_call_portion|>", 17: "<|im_middle|>", 62: "[UNK]", 63: "[PAD]",
}
N_SPECIAL = 64

CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' -%}<|im_system|>system<|im_middle|>"
    "{%- elif message['role'] == 'user' -%}<|im_user|>user<|im_middle|>"
    "{%- else -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}"
    "{{ message['content'] }}<|im_end|>"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}")


def special_tokens(n_ranks):
    out, reserved = {}, 0
    for k in range(N_SPECIAL):
        if k in _SPECIAL_LAYOUT:
            out[n_ranks + k] = _SPECIAL_LAYOUT[k]
        else:
            out[n_ranks + k] = f"<|reserved_token_{reserved}|>"
            reserved += 1
    return out


def load_ranks(path):
    ranks = {}
    with open(path, "rb") as f:
        for line in f.read().splitlines():
            if line.strip():
                tok, rank = line.split()
                ranks[base64.b64decode(tok)] = int(rank)
    return ranks


def release_config(cfg, n_ranks):
    bos = n_ranks
    c = {
        "architectures": ["KimiLinearForCausalLM"],
        "auto_map": {
            "AutoConfig": "configuration_kimi.KimiLinearConfig",
            "AutoModel": "modeling_kimi.KimiLinearModel",
            "AutoModelForCausalLM": "modeling_kimi.KimiLinearForCausalLM",
        },
        "bos_token_id": bos,
        "eos_token_id": bos + 2,
        "pad_token_id": bos + 63,
        "dtype": "bfloat16",
        "hidden_act": "silu",
        "initializer_range": 0.02,
        "max_position_embeddings": 4096,
        "model_max_length": 4096,
        "model_type": "kimi_linear",
        "moe_layer_freq": 1,
        "moe_router_activation_func": "sigmoid",
        "num_expert_group": 1,
        "num_key_value_heads": cfg["num_attention_heads"],
        "num_nextn_predict_layers": 0,
        "rope_scaling": None,
        "rope_theta": 10000.0,
        "tie_word_embeddings": False,
        "topk_group": 1,
        "transformers_version": "4.56.2",
        "use_cache": True,
        "use_grouped_topk": True,
    }
    c.update(cfg)
    return dict(sorted(c.items()))


def tensor_bytes(name, t):
    t = t.detach().contiguous()
    if name.endswith(F32_SUFFIXES):
        return "F32", t.float().numpy().tobytes()
    return "BF16", t.to(torch.bfloat16).view(torch.int16).numpy().tobytes()


def write_safetensors(path, items):
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, t in items:
        dtype, data = tensor_bytes(name, t)
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(8 + len(h)) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)
    return off


def write_checkpoint(state, out_dir):
    items = [(n, t) for n, t in state.items()]
    sizes = [len(tensor_bytes(n, t)[1]) for n, t in items]
    half, acc, cut = sum(sizes) / 2, 0, len(items)
    for i, s in enumerate(sizes):
        acc += s
        if acc >= half:
            cut = i + 1
            break
    shards = [items[:cut], items[cut:]]
    weight_map, total = {}, 0
    for k, shard in enumerate(shards):
        fname = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
        total += write_safetensors(os.path.join(out_dir, fname), shard)
        for n, _ in shard:
            weight_map[n] = fname
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total},
                   "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")


def write_tokenizer(tik, n_ranks, out_dir):
    shutil.copyfile(tik, os.path.join(out_dir, "tiktoken.model"))
    specials = special_tokens(n_ranks)
    decoder = {str(i): {"content": s, "lstrip": False, "normalized": False,
                        "rstrip": False, "single_word": False, "special": True}
               for i, s in specials.items()}
    tc = {
        "added_tokens_decoder": decoder,
        "additional_special_tokens": ["<|im_end|>", "<|im_user|>", "<|im_assistant|>",
                                      "<|start_header_id|>", "<|end_header_id|>", "[EOT]",
                                      "<|im_system|>", "<|im_middle|>"],
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
        "bos_token": "[BOS]",
        "chat_template": CHAT_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "[EOS]",
        "extra_special_tokens": {},
        "model_max_length": 4096,
        "pad_token": "[PAD]",
        "tokenizer_class": "TikTokenTokenizer",
        "unk_token": "[UNK]",
    }
    with open(os.path.join(out_dir, "tokenizer_config.json"), "w") as f:
        json.dump(tc, f, indent=2, ensure_ascii=False)
        f.write("\n")


@torch.no_grad()
def evaluate(model, ranks, work, prompts):
    with open(os.path.join(work, "heldout.txt"), "rb") as f:
        held_text = f.read()
    ids = tokenizer_ref.encode_plain(ranks, held_text)
    logits = model(torch.tensor([ids]))[0]
    nll = torch.nn.functional.cross_entropy(logits[:-1], torch.tensor(ids[1:]), reduction="sum")
    ppl = math.exp(nll.item() / (len(ids) - 1))
    inv = {r: t for t, r in ranks.items()}
    greedy = []
    for p in prompts:
        pid = tokenizer_ref.encode_plain(ranks, p.encode())
        seq = list(pid)
        for _ in range(GREEDY_TOKENS):
            seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
        cont = seq[len(pid):]
        text = b"".join(inv.get(i, b"") for i in cont).decode("utf-8", "replace")
        greedy.append({"prompt": p, "prompt_ids": pid, "ids": cont, "text": text})
    return held_text.decode(), ids, ppl, greedy


def export(model, cfg, tik, out_dir, work, prompts, meta):
    os.makedirs(out_dir, exist_ok=True)
    ranks = load_ranks(tik)
    n_ranks = len(ranks)
    state = model.state_dict()
    # The float reference = the checkpoint's own values: bf16-round the
    # matrices in place, keep the f32-stored ones.
    with torch.no_grad():
        for n, t in state.items():
            if not n.endswith(F32_SUFFIXES):
                t.copy_(t.to(torch.bfloat16).float())
    model.load_state_dict(state)
    model.eval()
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(release_config(cfg, n_ranks), f, indent=2)
        f.write("\n")
    write_checkpoint(state, out_dir)
    write_tokenizer(tik, n_ranks, out_dir)
    held_text, ids, ppl, greedy = evaluate(model, ranks, work, prompts)
    with open(os.path.join(out_dir, "heldout.txt"), "w") as f:
        f.write(held_text)
    ev = {
        "heldout_file": "heldout.txt",
        "heldout_tokens": len(ids),
        "float_perplexity": round(ppl, 4),
        "perplexity_definition": "exp(mean NLL of tokens 2..N given all earlier tokens, "
                                 "one pass from the start of the file, no BOS)",
        "greedy_tokens": GREEDY_TOKENS,
        "greedy": greedy,
        "heldout_ids": ids,
        "training": meta,
    }
    with open(os.path.join(out_dir, "eval.json"), "w") as f:
        json.dump(ev, f, indent=1)
        f.write("\n")
    print(f"held-out: {len(ids)} tokens, float perplexity {ppl:.3f}")
    for g in greedy:
        print(f"  {g['prompt']!r} -> {g['text']!r}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ckpt")
    ap.add_argument("tiktoken")
    ap.add_argument("out_dir")
    ap.add_argument("--work", default="/tmp/waste-demo-train")
    args = ap.parse_args()
    import train  # the config and prompts live there
    cfg = dict(train.CONFIG)
    model = kimi_linear.KimiLinear(cfg)
    model.load_state_dict(torch.load(args.ckpt))
    meta_path = os.path.join(args.work, "train_meta.json")
    meta = json.load(open(meta_path)) if os.path.exists(meta_path) else {}
    export(model, cfg, args.tiktoken, args.out_dir, args.work, train.PROMPTS, meta)


if __name__ == "__main__":
    main()
