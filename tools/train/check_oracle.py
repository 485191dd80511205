#!/usr/bin/python3
"""Checks the training forward (kimi_linear.py) against the project's numpy
oracle (tools/oracle, written independently from the model notes).

The oracle normally reads a container; here it reads the PyTorch state dict
through a small adapter that answers its tensor and expert queries with the
unquantised f32 weights. Both run the same token ids; the logits must agree
to float rounding (the oracle accumulates in f64, torch in f32).

Usage: check_oracle.py [CKPT.pt]   (random weights when no checkpoint)
Exit 0 when max |delta logit| < 2e-3 at every position and greedy argmax agrees.
"""

import os
import sys
import types

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "oracle"))
import kimi_linear  # noqa: E402
import train  # noqa: E402
from waste_oracle import container as oc  # noqa: E402
from waste_oracle import forward as of  # noqa: E402


class StateDictContainer:
    """Duck-typed stand-in for waste_oracle.container.Container."""

    def __init__(self, cfg, state):
        self.cfg = oc.Config(cfg, warn=lambda m: None)
        oc.Container._check_rotary(self)  # sets cfg.rope (None: NoPE)
        self.eq = oc.ExpertQuant({})
        self.prefix = ""
        self.t = {n: v.detach().float().numpy().astype(np.float32) for n, v in state.items()}

    def has(self, name):
        return name in self.t

    def entry(self, name):
        if name not in self.t:
            return None
        a = self.t[name]
        return types.SimpleNamespace(shape=list(a.shape), fmt=0, numel=a.size)

    def tensor(self, name):
        return self.t[name]

    def embed_row(self, tok):
        return self.t["model.embed_tokens.weight"][tok].copy()

    def record(self, L, e):
        p = "model.layers.%d.block_sparse_moe.experts.%d." % (L, e)
        rec = oc.ExpertRecord(None, None, 0)
        rec.dense = [self.t[p + w + ".weight"].astype(np.float64) for w in ("w1", "w3", "w2")]
        return rec


def main():
    torch.manual_seed(0)
    cfg = dict(train.CONFIG)
    model = kimi_linear.KimiLinear(cfg)
    if len(sys.argv) > 1:
        model.load_state_dict(torch.load(sys.argv[1]))
    else:
        # Random weights with visible structure: larger router and decay
        # spread than the init so every path matters.
        with torch.no_grad():
            for n, p in model.named_parameters():
                if n.endswith("dt_bias"):
                    p.normal_(0, 1)
        for moe in model.moe_blocks():
            moe.gate.e_score_correction_bias.normal_(0, 0.05)
    model.eval()
    ids = [int(i) for i in torch.randint(0, 4032, (24,), generator=torch.Generator().manual_seed(5))]
    with torch.no_grad():
        ref = model(torch.tensor([ids]))[0].numpy()
    ora = of.Model(StateDictContainer(cfg, model.state_dict()), expert_mode="dense")
    worst, ok = 0.0, True
    for t, tok in enumerate(ids):
        logits, _ = ora.step(tok)
        d = float(np.max(np.abs(logits - ref[t])))
        worst = max(worst, d)
        if int(np.argmax(logits)) != int(np.argmax(ref[t])):
            ok = False
            print(f"position {t}: argmax differs")
    print(f"max |delta logit| over {len(ids)} positions: {worst:.3e} "
          f"(logit scale {np.abs(ref).max():.2f}); near router ties: {len(ora.near_ties)}")
    ok = ok and worst < 2e-3
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
