#!/usr/bin/env python3
"""Prefix reuse in `waste serve`: time to first token per turn of a chat.

Usage: serve_prefix.py URL [TURNS] [MAX_TOKENS]

Against a running server (`waste serve MODEL --port P`), plays a chat of
TURNS user turns, each resending the whole history (as chat clients do),
streamed, and prints per turn: prompt tokens, tokens restored from the
server's snapshot (usage.prompt_tokens_details.cached_tokens), and the
client-side time to first token. Then it plays the last turn again after
an unrelated request (with --parallel 1 that evicts the conversation), i.e.
a prefill from scratch, for comparison. Standard library only.
"""
import json
import sys
import time
import urllib.request


def chat(url, messages, max_tokens):
    body = json.dumps({"messages": messages, "max_tokens": max_tokens, "temperature": 0,
                       "stream": True, "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(url + "/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    t0 = time.monotonic()
    ttft = None
    text, usage = "", None
    with urllib.request.urlopen(req, timeout=3600) as r:
        for line in r:
            line = line.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("usage"):
                usage = ev["usage"]
            for ch in ev.get("choices", []):
                piece = ch.get("delta", {}).get("content")
                if piece is not None and ttft is None:
                    ttft = time.monotonic() - t0
                text += piece or ""
    if ttft is None:
        ttft = time.monotonic() - t0
    return text, usage, ttft


def main():
    url = sys.argv[1].rstrip("/")
    turns = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    max_tokens = int(sys.argv[3]) if len(sys.argv) > 3 else 16
    questions = [
        "In the beginning, what was created, and what was the earth like? Tell it plainly.",
        "And what came on the second day? Keep to the words of the book.",
        "What was gathered together on the third day, and what did the earth bring forth?",
        "Which lights were made on the fourth day, and what were they for?",
        "What moved in the waters on the fifth day?",
        "Who was made on the sixth day?",
    ]
    messages = [{"role": "system", "content": "You answer questions about the book of Genesis. " * 8}]
    print("turn  prompt  cached  ttft_s")
    for t in range(turns):
        messages.append({"role": "user", "content": questions[t % len(questions)]})
        text, usage, ttft = chat(url, messages, max_tokens)
        cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
        print(f"{t + 1:4d}  {usage['prompt_tokens']:6d}  {cached:6d}  {ttft:6.3f}")
        messages.append({"role": "assistant", "content": text})
    messages.pop()
    chat(url, [{"role": "user", "content": "unrelated " * 40}], 1)
    _, usage, ttft = chat(url, messages, max_tokens)
    cached = usage.get("prompt_tokens_details", {}).get("cached_tokens", 0)
    print(f"last turn from scratch: prompt {usage['prompt_tokens']}, cached {cached}, ttft {ttft:.3f} s")


if __name__ == "__main__":
    main()
