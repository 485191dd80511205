#!/usr/bin/python3
"""Independent reference for Hugging Face byte-level BPE tokenizers.

Reads a release's tokenizer.json directly (not the container waste converts
it into) and tokenizes the way the Hugging Face `tokenizers` library
documents it, written from that documented behaviour rather than from the
C++ code:

* added tokens are cut out first, leftmost-longest (unless --plain);
* each remaining segment goes through the pre_tokenizer: a Split runs its
  regex over every current piece on its own, turns the piece into
  alternating matched / unmatched spans, swaps their roles when `invert`,
  and keeps them by its `behavior` (Removed, Isolated, MergedWithPrevious,
  MergedWithNext, Contiguous); empty pieces are dropped; ByteLevel maps the
  UTF-8 bytes to GPT-2's byte-to-unicode alphabet (splitting first with
  GPT-2's pattern when use_regex is true);
* BPE by the merge list: start from single characters, repeatedly join the
  adjacent pair with the lowest merge position (leftmost on ties) until no
  adjacent pair is a merge; each result is looked up in model.vocab.

Usage: hf_tokenizer_ref.py TOKENIZER_JSON CASES_JSON [--plain]
CASES_JSON is a JSON array of strings; prints a JSON array with one list of
ids per case. Exit status 3 when the `regex` module is missing (callers
SKIP on it).
"""

import json
import sys

try:
    import regex
except ImportError:  # pragma: no cover - depends on the host
    sys.stderr.write("hf_tokenizer_ref.py: python3-regex is not installed\n")
    sys.exit(3)

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bytes_to_unicode():
    """GPT-2's table: printable Latin-1 bytes map to themselves, the rest
    to U+0100 onwards in byte order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\u00a1"), ord("\u00ac") + 1)) + \
        list(range(ord("\u00ae"), ord("\u00ff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def split_piece(piece, rx, behavior, invert):
    spans = []
    prev = 0
    for m in rx.finditer(piece):
        start, end = m.span()
        if prev != start:
            spans.append((prev, start, False))
        spans.append((start, end, True))
        prev = end
    if prev != len(piece):
        spans.append((prev, len(piece), False))
    if invert:
        spans = [(s, e, not is_match) for s, e, is_match in spans]
    kept = []  # [start, end, remove]
    if behavior == "Isolated":
        kept = [[s, e, False] for s, e, _ in spans]
    elif behavior == "Removed":
        kept = [[s, e, is_match] for s, e, is_match in spans]
    elif behavior == "Contiguous":
        previous = False
        for s, e, is_match in spans:
            if is_match == previous and kept:
                kept[-1][1] = e
            else:
                kept.append([s, e, False])
            previous = is_match
    elif behavior == "MergedWithPrevious":
        previous = False
        for s, e, is_match in spans:
            if is_match and not previous and kept:
                kept[-1][1] = e
            else:
                kept.append([s, e, False])
            previous = is_match
    elif behavior == "MergedWithNext":
        previous = False
        for s, e, is_match in reversed(spans):
            if is_match and not previous and kept:
                kept[-1][0] = s
            else:
                kept.append([s, e, False])
            previous = is_match
        kept.reverse()
    else:
        raise ValueError("unknown behavior " + behavior)
    return [piece[s:e] for s, e, remove in kept if not remove and e > s]


class HfTokenizer:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        model = doc["model"]
        assert model["type"] == "BPE"
        self.vocab = model["vocab"]
        self.ignore_merges = bool(model.get("ignore_merges", False))
        self.merge_rank = {}
        for i, m in enumerate(model["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.merge_rank[(a, b)] = i
        self.added = sorted((t["content"] for t in doc.get("added_tokens") or []), key=len, reverse=True)
        self.added_id = {t["content"]: t["id"] for t in doc.get("added_tokens") or []}
        self.added_rx = regex.compile("|".join(regex.escape(t) for t in self.added)) if self.added else None
        self.rules = []  # (compiled, behavior, invert)
        self._collect(doc["pre_tokenizer"])
        self.b2u = bytes_to_unicode()

    def _collect(self, pt):
        if pt["type"] == "Sequence":
            for p in pt["pretokenizers"]:
                self._collect(p)
        elif pt["type"] == "Split":
            pat = pt["pattern"]
            text = pat["Regex"] if "Regex" in pat else regex.escape(pat["String"])
            self.rules.append((regex.compile(text), pt["behavior"], pt.get("invert", False)))
        elif pt["type"] == "ByteLevel":
            assert not pt.get("add_prefix_space", False)
            if pt.get("use_regex", True):
                self.rules.append((regex.compile(GPT2_PATTERN), "Isolated", False))
        else:
            raise ValueError("unsupported pre-tokenizer " + pt["type"])

    def bpe(self, word):
        if self.ignore_merges and word in self.vocab:
            return [self.vocab[word]]
        parts = list(word)
        while len(parts) > 1:
            best = None
            for i in range(len(parts) - 1):
                r = self.merge_rank.get((parts[i], parts[i + 1]))
                if r is not None and (best is None or r < best[0]):
                    best = (r, i)
            if best is None:
                break
            i = best[1]
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return [self.vocab[p] for p in parts]

    def encode_plain(self, text):
        pieces = [text] if text else []
        for rx, behavior, invert in self.rules:
            pieces = [q for p in pieces for q in split_piece(p, rx, behavior, invert)]
        ids = []
        for p in pieces:
            ids.extend(self.bpe("".join(self.b2u[b] for b in p.encode("utf-8"))))
        return ids

    def encode(self, text, plain):
        if plain or self.added_rx is None:
            return self.encode_plain(text)
        ids = []
        pos = 0
        for m in self.added_rx.finditer(text):
            ids.extend(self.encode_plain(text[pos:m.start()]))
            ids.append(self.added_id[m.group(0)])
            pos = m.end()
        ids.extend(self.encode_plain(text[pos:]))
        return ids


def main():
    args = [a for a in sys.argv[1:] if a != "--plain"]
    if len(args) != 2:
        sys.stderr.write(__doc__)
        return 2
    tok = HfTokenizer(args[0])
    with open(args[1], encoding="utf-8") as f:
        cases = json.load(f)
    plain = "--plain" in sys.argv[1:]
    print(json.dumps([tok.encode(c, plain) for c in cases]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
