#!/usr/bin/python3
"""Writes tests/data/deepseek_tokenizer.json: a small tokenizer.json in the
shape DeepSeek-V3/R1 ship (byte-level BPE, their Split pre-tokenizer
sequence, specials at ids 0..2 inside the vocabulary and added tokens after
it), trained here the way Hugging Face's BpeTrainer trains: words counted
after pre-tokenization, the most frequent adjacent pair merged everywhere
(ties to the lower ids), a merge whose result already exists reusing that
id. Deterministic; rerun it only to change the test data:

  /usr/bin/python3 tests/data/make_deepseek_tokenizer.py > tests/data/deepseek_tokenizer.json

The three Split regexes are DeepSeek-V3's, as published in its
tokenizer.json (written here from memory of that file).
"""

import collections
import json
import os
import sys

import regex

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tools"))
from hf_tokenizer_ref import bytes_to_unicode, split_piece  # noqa: E402

SPLITS = [
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
]

CORPUS = """
The tokenizer splits the text into pieces, and then it merges the bytes of every piece into tokens.
The most common words of the language become single tokens; the rare words are spelled with several.
Numbers are split into groups of at most three digits: 2024, 163840, 3.14159 and 1234567.
def main(argv):\n    for i in range(10):\n        print("hello, world", i)\n    return 0\n
if (x != y && y >= 0) { return x->next; } // comment: the end
深度求索的模型使用字节级的分词器。中文的文字会被分成连续的片段。
日本語のテキストもカタカナとひらがなで書かれています。トークナイザーのテストです。
Emoji too: 😀 🚀 👍🏽 and the café, naïve résumé, Ærøskøbing, Straße.
  indented   text\twith\ttabs\r\nand windows newlines\n\n\nthen   spaces.
"""

SPECIALS_IN_VOCAB = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"]
ADDED_AFTER = ["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "<｜fim▁hole｜>"]
N_MERGES = 420


def pretokenize(text):
    pieces = [text]
    for pattern in SPLITS:
        rx = regex.compile(pattern)
        pieces = [q for p in pieces for q in split_piece(p, rx, "Isolated", False)]
    return pieces


def main():
    b2u = bytes_to_unicode()
    vocab = {}
    for s in SPECIALS_IN_VOCAB:
        vocab[s] = len(vocab)
    for ch in sorted(b2u.values()):
        vocab[ch] = len(vocab)
    counts = collections.Counter()
    for line in (CORPUS * 3).splitlines(keepends=True):
        for piece in pretokenize(line):
            counts["".join(b2u[b] for b in piece.encode("utf-8"))] += 1
    words = [[list(w), c] for w, c in sorted(counts.items())]
    merges = []
    for _ in range(N_MERGES):
        pairs = collections.Counter()
        for parts, c in words:
            for i in range(len(parts) - 1):
                pairs[(parts[i], parts[i + 1])] += c
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], vocab[p[0]], vocab[p[1]]))
        if pairs[best] < 2:
            break
        new = best[0] + best[1]
        if new not in vocab:
            vocab[new] = len(vocab)
        merges.append(best[0] + " " + best[1])
        for w in words:
            parts = w[0]
            i = 0
            out = []
            while i < len(parts):
                if i + 1 < len(parts) and (parts[i], parts[i + 1]) == best:
                    out.append(new)
                    i += 2
                else:
                    out.append(parts[i])
                    i += 1
            w[0] = out
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": True, "special": True} for i, s in enumerate(SPECIALS_IN_VOCAB)]
    for s in ADDED_AFTER:
        added.append({"id": len(vocab) + len(added) - len(SPECIALS_IN_VOCAB), "content": s,
                      "single_word": False, "lstrip": False, "rstrip": False, "normalized": True,
                      "special": not s.endswith("think>")})
    doc = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False}
                for p in SPLITS
            ] + [{"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}],
        },
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": merges},
    }
    json.dump(doc, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
