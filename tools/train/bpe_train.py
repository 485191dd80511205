#!/usr/bin/python3
"""Byte-level BPE trainer that writes a tiktoken rank file.

Pre-tokenization is Kimi's pattern, taken from tools/tokenizer_ref.py (the
project's independent reference tokenizer), so the pieces the merges are
learnt on are exactly the pieces the engine will cut at run time. Ranks
0..255 are the single bytes in byte order; every later rank is one merge, in
the order learnt (lower rank = merged first, as tiktoken applies them).
Ties between equally frequent pairs go to the lexicographically smallest
pair of byte strings, so the result does not depend on hash order.

Usage: bpe_train.py CORPUS OUT_TIKTOKEN_MODEL --ranks N
"""

import argparse
import base64
import collections
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tokenizer_ref  # noqa: E402  (tools/tokenizer_ref.py)


def count_pieces(data):
    return collections.Counter(tokenizer_ref.pre_tokenize(data))


def train(piece_counts, n_ranks):
    """Returns the list of token byte strings, index = rank."""
    vocab = [bytes([b]) for b in range(256)]
    words = []          # list of [symbols list, count]
    for piece, cnt in piece_counts.items():
        if len(piece) > 1:
            words.append([[piece[i:i + 1] for i in range(len(piece))], cnt])
    pair_count = collections.Counter()
    where = collections.defaultdict(set)   # pair -> word indices
    for wi, (syms, cnt) in enumerate(words):
        for a, b in zip(syms, syms[1:]):
            pair_count[(a, b)] += cnt
            where[(a, b)].add(wi)
    while len(vocab) < n_ranks and pair_count:
        best = max(pair_count.items(), key=lambda kv: (kv[1], _neg(kv[0])))
        pair, cnt = best
        if cnt < 2:
            break
        merged = pair[0] + pair[1]
        vocab.append(merged)
        for wi in list(where[pair]):
            syms, wc = words[wi]
            for a, b in zip(syms, syms[1:]):      # remove old pairs
                pair_count[(a, b)] -= wc
                if pair_count[(a, b)] <= 0:
                    del pair_count[(a, b)]
            out, i = [], 0
            while i < len(syms):
                if i + 1 < len(syms) and syms[i] == pair[0] and syms[i + 1] == pair[1]:
                    out.append(merged)
                    i += 2
                else:
                    out.append(syms[i])
                    i += 1
            words[wi][0] = out
            for a, b in zip(out, out[1:]):         # add new pairs
                pair_count[(a, b)] += wc
                where[(a, b)].add(wi)
        where.pop(pair, None)
    return vocab


class _neg:
    """Orders pairs so that max() prefers the lexicographically smallest."""
    __slots__ = ("p",)

    def __init__(self, p):
        self.p = p

    def __lt__(self, other):
        return self.p > other.p

    def __eq__(self, other):
        return self.p == other.p


def write_tiktoken(vocab, path):
    with open(path, "wb") as f:
        for rank, tok in enumerate(vocab):
            f.write(base64.b64encode(tok) + b" " + str(rank).encode() + b"\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus")
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=4000)
    args = ap.parse_args()
    with open(args.corpus, "rb") as f:
        data = f.read()
    vocab = train(count_pieces(data), args.ranks)
    write_tiktoken(vocab, args.out)
    print(f"{len(vocab)} ranks written to {args.out}")


if __name__ == "__main__":
    main()
