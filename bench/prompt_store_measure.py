# `waste serve --prompt-cache`: two conversations on one slot. A's first
# turn, then B's (the slot goes to B: with the cache, A's point is stored
# on the way), then A's next turn, whose time to first token (max_tokens 1)
# is what a user switching back waits for. For the cache on and off
# (alternating, REPS each, a fresh server and an empty cache directory each
# time, --budget 4G): A's second-turn time and cached prompt tokens, and
# B's first-turn time (what storing A's point adds to the switch).
# docs/SERVER.md, "Prompt cache", has the figures and the container used.
# Usage: /usr/bin/python3 bench/prompt_store_measure.py WASTE MODEL REPS [SYSTEM_REPEATS]
# A container whose every id has text (see bench/follow_on_measure.py).
import shutil, statistics, sys, tempfile

from serve_bench import post, start as start_server

WASTE, MODEL, REPS = sys.argv[1], sys.argv[2], int(sys.argv[3])
SYSTEM = int(sys.argv[4]) if len(sys.argv) > 4 else 60

def start(cache_dir):
    return start_server(WASTE, MODEL, ["--prompt-cache", cache_dir] if cache_dir else [])

def chat(url, messages, max_tokens):
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "thinking": False,
            # The generator tokenizer's special tokens (531..541): the reply
            # runs to max_tokens instead of ending at a random end marker.
            "logit_bias": {str(i): -100 for i in range(531, 542)}}
    return post(url, "/v1/chat/completions", body)

def scenario(url):
    a = [{"role": "system", "content": "You are a careful assistant. " * SYSTEM},
         {"role": "user", "content": "Explain how a log-structured merge tree works."}]
    b = [{"role": "system", "content": "You answer in verse, briefly. " * SYSTEM},
         {"role": "user", "content": "Describe the sea."}]
    first, _ = chat(url, a, 20)
    b_out, b_s = chat(url, b, 20)
    a += [{"role": "assistant", "content": first["choices"][0]["message"]["content"] or ""},
          {"role": "user", "content": "And how does compaction work?"}]
    second, second_s = chat(url, a, 1)
    return {"a_prompt": first["usage"]["prompt_tokens"], "b_s": round(b_s, 2),
            "a2_prompt": second["usage"]["prompt_tokens"],
            "a2_cached": second["usage"]["prompt_tokens_details"]["cached_tokens"],
            "a2_s": round(second_s, 3)}

results = {True: [], False: []}
for rep in range(REPS):
    for cache in (True, False):
        d = tempfile.mkdtemp(prefix="waste-store-") if cache else None
        p, url = start(d)
        try:
            r = scenario(url)
            results[cache].append(r)
            print(f"rep {rep} cache {'on' if cache else 'off'}: {r}", flush=True)
        finally:
            p.terminate(); p.wait()
            if d:
                shutil.rmtree(d, ignore_errors=True)
for cache, rs in results.items():
    for key in ("a2_s", "a2_cached", "b_s"):
        v = [r[key] for r in rs]
        print(f"cache {'on' if cache else 'off'} {key}: median {statistics.median(v)} "
              f"range {min(v)}..{max(v)}")
