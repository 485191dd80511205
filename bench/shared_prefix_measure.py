# Shared-prefix points (docs/SERVER.md): an agent's second task. Task A
# (a long system prompt, a first message of a few hundred tokens, then four
# more turns), then task B: the same system prompt, another first message.
# B's time to first token (max_tokens 1) is what the agent waits for before
# its new task starts. For shared-prefix points on (the defaults) and off
# (`--earlier-points 0`, no --prompt-cache: nothing can keep them),
# alternating, REPS each, a fresh server each time, --budget 4G: B's time,
# prompt and cached tokens. (A build from before shared-prefix points, run
# with its defaults, reuses nothing here either: A's first point lies past
# its long first message, and the later turns push it out.)
# Usage: /usr/bin/python3 bench/shared_prefix_measure.py WASTE MODEL REPS [SYSTEM_REPEATS]
# A container whose every id has text (see bench/follow_on_measure.py).
import statistics, sys

from serve_bench import post, start

WASTE, MODEL, REPS = sys.argv[1], sys.argv[2], int(sys.argv[3])
SYSTEM = int(sys.argv[4]) if len(sys.argv) > 4 else 60

def chat(url, messages, max_tokens):
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "thinking": False,
            # The generator tokenizer's special tokens (531..541): the reply
            # runs to max_tokens instead of ending at a random end marker.
            "logit_bias": {str(i): -100 for i in range(531, 542)}}
    return post(url, "/v1/chat/completions", body)

def scenario(url):
    system = {"role": "system", "content": "You are a careful coding agent. Use the tools. " * SYSTEM}
    task = "The parser test fails on nested lists; the log says: expected ']' at 1:14. " * 8
    a = [system, {"role": "user", "content": "Fix the failing test. " + task}]
    for follow_up in ("Now run the linter.", "Show the diff.", "Run the tests again.",
                      "Commit the change."):
        out, _ = chat(url, a, 12)
        a += [{"role": "assistant", "content": out["choices"][0]["message"]["content"] or ""},
              {"role": "user", "content": follow_up}]
    chat(url, a, 12)
    b = [system, {"role": "user", "content": "Add a --verbose flag to the command line tool. " + task}]
    out, seconds = chat(url, b, 1)
    return {"b_prompt": out["usage"]["prompt_tokens"],
            "b_cached": out["usage"]["prompt_tokens_details"]["cached_tokens"],
            "b_s": round(seconds, 3)}

results = {True: [], False: []}
for rep in range(REPS):
    for on in (True, False):
        p, url = start(WASTE, MODEL, [] if on else ["--earlier-points", "0"])
        try:
            r = scenario(url)
            results[on].append(r)
            print(f"rep {rep} shared points {'on' if on else 'off'}: {r}", flush=True)
        finally:
            p.terminate(); p.wait()
for on, rs in results.items():
    for key in ("b_s", "b_cached"):
        v = [r[key] for r in rs]
        print(f"shared points {'on' if on else 'off'} {key}: median {statistics.median(v)} "
              f"range {min(v)}..{max(v)}")
