# `waste serve` follow-on prefill: the second turn of a chat, sent after the
# user "reads" the first reply for THINK seconds. For follow-on on and off
# (alternating, REPS each, a fresh server each time, --budget 4G): the
# second turn's time to its first token (max_tokens 1), its cached prompt
# tokens, and the first reply's length. Thinking off; the first reply is
# text (see LONG_TEXT). docs/SERVER.md, "Follow-on
# prefill", has the figures and the container used.
# Usage: /usr/bin/python3 bench/follow_on_measure.py WASTE MODEL REPS [THINK] [REPLY_TOKENS] [MODE]
# MODE plain (default): a plain chat; it needs a container whose every id
# has text (a random-weight model picks ids at random: with the generator's
# 542-token tokenizer, `waste-gen ... --override '{"vocab_size":542,...}'`).
# json: both turns ask for one long JSON string, which keeps the reply to
# text on any container (response_format puts a note after the messages,
# so the first turn's own restore point is of no use to the second).
import statistics, sys, time

from serve_bench import post, start as start_server

WASTE, MODEL, REPS = sys.argv[1], sys.argv[2], int(sys.argv[3])
THINK = float(sys.argv[4]) if len(sys.argv) > 4 else 10.0
REPLY = int(sys.argv[5]) if len(sys.argv) > 5 else 300
MODE = sys.argv[6] if len(sys.argv) > 6 else "plain"

def start(follow_on):
    return start_server(WASTE, MODEL, [] if follow_on else ["--no-follow-on"])

# json mode: both turns ask for one long JSON string: a random-weight model
# otherwise picks ids the generator's small tokenizer gives no text (and
# markup), leaving next to nothing for the client to send back.
LONG_TEXT = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {
    "type": "object", "properties": {"answer": {"type": "string", "minLength": 4000}},
    "required": ["answer"]}}}

def chat(url, messages, max_tokens, json_text=False):
    body = {"messages": messages, "max_tokens": max_tokens, "temperature": 0, "thinking": False}
    if json_text and MODE == "json":
        body["response_format"] = LONG_TEXT
    elif json_text:
        # The generator tokenizer's special tokens (531..541): the reply
        # runs to max_tokens instead of ending at a random end marker.
        body["logit_bias"] = {str(i): -100 for i in range(531, 542)}
    return post(url, "/v1/chat/completions", body)

def scenario(url):
    history = [{"role": "system", "content": "You are a careful assistant. " * 20},
               {"role": "user", "content": "Explain how a log-structured merge tree works."}]
    first, first_s = chat(url, history, REPLY, json_text=True)
    time.sleep(THINK)
    history += [{"role": "assistant", "content": first["choices"][0]["message"]["content"] or ""},
                {"role": "user", "content": "And how does compaction work?"}]
    second, second_s = chat(url, history, 1, json_text=True)
    return {"first_prompt": first["usage"]["prompt_tokens"],
            "reply_tokens": first["usage"]["completion_tokens"], "first_s": round(first_s, 2),
            "second_prompt": second["usage"]["prompt_tokens"],
            "second_cached": second["usage"]["prompt_tokens_details"]["cached_tokens"],
            "second_s": round(second_s, 3)}

results = {True: [], False: []}
for rep in range(REPS):
    for follow_on in (True, False):
        p, url = start(follow_on)
        try:
            r = scenario(url)
            results[follow_on].append(r)
            print(f"rep {rep} follow-on {'on' if follow_on else 'off'}: {r}", flush=True)
        finally:
            p.terminate(); p.wait()
for follow_on, rs in results.items():
    for key in ("second_s", "second_cached", "reply_tokens"):
        v = [r[key] for r in rs]
        print(f"follow-on {'on' if follow_on else 'off'} {key}: median {statistics.median(v)} "
              f"range {min(v)}..{max(v)}")
