#!/usr/bin/python3
"""Independent reference tokenizer for waste (docs/TOKENIZER.md).

Written from the spec (ENGINE.md §9), not from the C++ code: pre-tokenization
uses the upstream Kimi pattern verbatim through the `regex` module (V1 mode,
which understands the `&&` class intersection), BPE is the plain quadratic
tiktoken merge loop, and markup splitting is a regex alternation of the
specials, longest first.

Usage:
  tokenizer_ref.py --container DIR [--markup] [--whole] FILE
  tokenizer_ref.py --pieces [--whole] FILE
Reads FILE as bytes. Each line (split after every b"\\n", the newline kept)
is one case, or the whole file is one case with --whole. Prints one line per
case: the ids separated by spaces (an empty line for no ids), or with
--pieces the pre-tokens, each as hex, separated by '|'.

Exit status 3 when the `regex` module is missing (callers SKIP on it).
"""

import argparse
import base64
import json
import os
import re
import sys

try:
    import regex
except ImportError:  # pragma: no cover - depends on the host
    sys.stderr.write("tokenizer_ref.py: python3-regex is not installed\n")
    sys.exit(3)

# Kimi's pre-tokenization pattern, verbatim as passed to tiktoken.
PAT_STR = "|".join(
    [
        r"""[\p{Han}]+""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)

# V1 enables set operations (`&&`). Its default full case folding is turned
# off so `(?i:...)` uses simple case folding, as Rust's regex crate does.
PATTERN = regex.compile("(?-f)" + PAT_STR, flags=regex.V1)


def load_ranks(container):
    path = os.path.join(container, "tokenizer.model")
    if not os.path.exists(path):
        path = os.path.join(container, "tiktoken.model")
    ranks = {}
    with open(path, "rb") as f:
        for line in f.read().splitlines():
            if not line.strip():
                continue
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def load_specials(container):
    path = os.path.join(container, "specials.json")
    if not os.path.exists(path):
        return {}
    with open(path, "rb") as f:
        entries = json.loads(f.read().decode("utf-8"))
    return {e["text"].encode("utf-8"): int(e["id"]) for e in entries}


def byte_pair_merge(ranks, piece):
    """tiktoken's merge: lowest-rank adjacent pair first, leftmost on ties."""
    parts = [piece[i:i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, best_rank = -1, None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best_rank is None or r < best_rank):
                best, best_rank = i, r
        if best < 0:
            break
        parts[best:best + 2] = [parts[best] + parts[best + 1]]
    return [ranks[p] for p in parts]


def bpe(ranks, piece):
    if piece in ranks:
        return [ranks[piece]]
    return byte_pair_merge(ranks, piece)


def utf8_runs(data):
    """Splits bytes into (is_valid, bytes) runs: maximal valid UTF-8 text and
    maximal runs of bytes that cannot start a valid character."""
    text = data.decode("utf-8", errors="surrogateescape")
    runs = []
    for chunk in regex.split(r"([\udc80-\udcff]+)", text):
        if not chunk:
            continue
        if "\udc80" <= chunk[0] <= "\udcff":
            runs.append((False, chunk.encode("utf-8", errors="surrogateescape")))
        else:
            runs.append((True, chunk))
    return runs


def pre_tokenize(data):
    """Pre-tokens of `data` (bytes): each valid UTF-8 run split by the
    pattern as a text of its own, each invalid run one piece."""
    pieces = []
    for valid, run in utf8_runs(data):
        if valid:
            pieces.extend(m.group(0).encode("utf-8") for m in PATTERN.finditer(run))
        else:
            pieces.append(run)
    return pieces


def encode_plain(ranks, data):
    ids = []
    for piece in pre_tokenize(data):
        ids.extend(bpe(ranks, piece))
    return ids


def encode_markup(ranks, specials, data):
    if not specials:
        return encode_plain(ranks, data)
    alternation = b"|".join(
        re.escape(s) for s in sorted(specials, key=len, reverse=True))
    finder = re.compile(alternation)
    ids, pos = [], 0
    for m in finder.finditer(data):
        ids.extend(encode_plain(ranks, data[pos:m.start()]))
        ids.append(specials[m.group(0)])
        pos = m.end()
    ids.extend(encode_plain(ranks, data[pos:]))
    return ids


def split_cases(data, whole):
    if whole:
        return [data]
    cases = data.split(b"\n")
    out = [c + b"\n" for c in cases[:-1]]
    if cases[-1]:
        out.append(cases[-1])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--container")
    ap.add_argument("--markup", action="store_true")
    ap.add_argument("--pieces", action="store_true")
    ap.add_argument("--whole", action="store_true")
    ap.add_argument("file")
    args = ap.parse_args()
    if not args.pieces and not args.container:
        ap.error("--container is required unless --pieces is given")
    ranks = {} if args.pieces else load_ranks(args.container)
    specials = {} if args.pieces else load_specials(args.container)
    with open(args.file, "rb") as f:
        data = f.read()
    out = []
    for case in split_cases(data, args.whole):
        if args.pieces:
            out.append("|".join(p.hex() for p in pre_tokenize(case)))
            continue
        if args.markup:
            ids = encode_markup(ranks, specials, case)
        else:
            ids = encode_plain(ranks, case)
        out.append(" ".join(str(i) for i in ids))
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
