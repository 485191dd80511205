#!/usr/bin/python3
"""Builds the demo model's corpus from the King James Bible.

Source: Debian's `bible-kjv` + `bible-kjv-text` packages (the `bible` program
prints the text). The King James Version (1611) is in the public domain
outside the United Kingdom; see demo-model/README.md.

Writes into OUT_DIR:
  train.txt    every book except the held-out one, one chapter per paragraph
               (verses joined by spaces, verse numbers dropped), paragraphs
               separated by a blank line;
  heldout.txt  the held-out book (Ruth) in the same form, never trained on;
  chat.txt     chat-template exchanges built from consecutive verses of the
               training books (the user says a verse, the assistant answers
               with the next one), one conversation per line, so the model
               learns the turn markers `waste chat` uses.

Usage: corpus.py OUT_DIR [--seed N]
"""

import argparse
import os
import random
import re
import subprocess

HELDOUT_BOOK = "Ruth"

USER = "<|im_user|>user<|im_middle|>"
ASSISTANT = "<|im_assistant|>assistant<|im_middle|>"
SYSTEM = "<|im_system|>system<|im_middle|>"
END = "<|im_end|>"
SYSTEM_PROMPTS = ["You are a helpful assistant", "You are a helpful assistant."]


def read_bible():
    """[(book, chapter, [verse texts])] in canonical order."""
    out = subprocess.run(["bible", "-l100000", "Gen1:1-Rev22:21"], check=True,
                         capture_output=True, text=True).stdout
    chapters = []
    head = re.compile(r"^([1-3]?\s?[A-Za-z][A-Za-z ]*?) (\d+)$")
    verse = re.compile(r"^\s*\d+ (.*)$")
    for line in out.splitlines():
        if not line.strip():
            continue
        m = head.match(line)
        if m:
            chapters.append((m.group(1), int(m.group(2)), []))
            continue
        v = verse.match(line)
        if v and chapters:
            chapters[-1][2].append(v.group(1).strip())
    return chapters


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--seed", type=int, default=1611)
    args = ap.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    rng = random.Random(args.seed)
    chapters = read_bible()
    train, held, chat = [], [], []
    for book, _, verses in chapters:
        para = " ".join(verses)
        if book == HELDOUT_BOOK:
            held.append(para)
            continue
        train.append(para)
        # One conversation per chapter: 1..3 exchanges of consecutive verses.
        if len(verses) >= 3:
            turns = rng.randint(1, 3)
            start = rng.randrange(0, max(1, len(verses) - 2 * turns))
            conv = ""
            if rng.random() < 0.25:
                conv += SYSTEM + rng.choice(SYSTEM_PROMPTS) + END
            for t in range(turns):
                i = start + 2 * t
                if i + 1 >= len(verses):
                    break
                conv += USER + verses[i] + END + ASSISTANT + verses[i + 1] + END
            chat.append(conv)
    with open(os.path.join(args.out_dir, "train.txt"), "w") as f:
        f.write("\n\n".join(train) + "\n")
    with open(os.path.join(args.out_dir, "heldout.txt"), "w") as f:
        f.write("\n\n".join(held) + "\n")
    with open(os.path.join(args.out_dir, "chat.txt"), "w") as f:
        f.write("\n".join(chat) + "\n")
    print(f"{len(train)} training chapters, {len(held)} held-out chapters "
          f"({HELDOUT_BOOK}), {len(chat)} conversations")


if __name__ == "__main__":
    main()
