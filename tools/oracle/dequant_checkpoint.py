#!/usr/bin/python3
"""Rewrite a pack-quantized int4 checkpoint with its int4 matrices as F32.

  /usr/bin/python3 tools/oracle/dequant_checkpoint.py SRC OUT

OUT (created) gets SRC's config.json and its other top-level files (the
tokenizer) unchanged, and one model.safetensors holding every tensor of
SRC: each int4 matrix W (W_packed + W_scale + W_shape, compressed-tensors
"pack-quantized") as an F32 W holding the values the oracle's own decoder
(waste_oracle.checkpoint.int4_dequantize, written from the format's
description) gives, every other tensor byte for byte. Since f32 holds every
q * scale of a bf16 scale exactly, `waste convert OUT` must write the same
container as `waste convert SRC`: the converter's int4 reader is checked
against this decoder (tests/e2e/convert_e2e_test.cc).

Exit status 0 done, 1 an input this decoder refuses (the message says why).
"""

import json
import os
import shutil
import struct
import sys

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from waste_oracle.checkpoint import _to_f32, int4_dequantize, int4_group_size, shard_map  # noqa: E402
from waste_oracle.container import FormatError  # noqa: E402


def dequantized_tensors(where, group):
    """name -> (dtype, shape, bytes) of the F32 checkpoint."""
    out = {}
    packed = {n[: -len("_packed")] for n in where if n.endswith("_packed")}
    companions = {w + s for w in packed for s in ("_packed", "_scale", "_shape")}
    for w in sorted(packed):
        pdtype, pshape, pdata = where[w + "_packed"].raw(w + "_packed")
        for need in ("_scale", "_shape"):
            if w + need not in where:
                raise FormatError("%s_packed without %s%s" % (w, w, need))
        sd, ss, sdata = where[w + "_scale"].raw(w + "_scale")
        hd, _, hdata = where[w + "_shape"].raw(w + "_shape")
        shape = np.frombuffer(hdata, "<i4" if hd == "I32" else "<i8")
        a = int4_dequantize(pdtype, pshape, pdata, _to_f32(sd, ss, sdata), shape, group)
        out[w] = ("F32", list(a.shape), a.astype("<f4").tobytes())
    for n in where:
        if n not in companions:
            out[n] = where[n].raw(n)
    return out


def write_safetensors(path, tensors):
    header = {"__metadata__": {"format": "pt"}}
    off = 0
    names = sorted(tensors)
    for n in names:
        dtype, shape, data = tensors[n]
        header[n] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header).encode("utf-8")
    h += b" " * ((8 - (8 + len(h)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for n in names:
            f.write(tensors[n][2])


def main(argv):
    if len(argv) != 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    src, out = argv[1], argv[2]
    try:
        with open(os.path.join(src, "config.json")) as f:
            cfg = json.load(f)
        group = int4_group_size(cfg.get("quantization_config"))
        if group is None:
            raise FormatError("%s: config.json declares no pack-quantized int4 scheme" % src)
        tensors = dequantized_tensors(shard_map(src), group)
    except (FormatError, KeyError, ValueError, OSError) as e:
        print("dequant_checkpoint: %s" % e, file=sys.stderr)
        return 1
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(src):
        p = os.path.join(src, name)
        if os.path.isfile(p) and not name.endswith(".safetensors") and name != "model.safetensors.index.json":
            shutil.copyfile(p, os.path.join(out, name))
    write_safetensors(os.path.join(out, "model.safetensors"), tensors)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
