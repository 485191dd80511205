# `waste serve --parallel`: a short request sent while a long one runs. For
# --parallel 1 and 2 (alternating, REPS each, a fresh server each time,
# --budget 4G, one 64-token warm-up): the short one's latency, the long
# one's, and the decode rate of both together. docs/SERVER.md,
# "Concurrent requests", has the figures and the container used.
# Usage: /usr/bin/python3 bench/serve_parallel_measure.py WASTE MODEL REPS
import statistics, sys, threading, time

from serve_bench import post as post_json, start as start_server

WASTE, MODEL, REPS = sys.argv[1], sys.argv[2], int(sys.argv[3])

def start(parallel):
    return start_server(WASTE, MODEL, ["--parallel", str(parallel)])

def post(url, body):
    return post_json(url, "/v1/completions", body, timeout=600)[0]

def scenario(url):
    long_body = {"prompt": "In the beginning", "max_tokens": 200, "temperature": 0}
    short_body = {"prompt": "And it came to pass", "max_tokens": 16, "temperature": 0}
    out = {}
    def run_long():
        t = time.time(); r = post(url, long_body); out["long_s"] = time.time() - t
        out["long_tokens"] = r["usage"]["completion_tokens"]
    t0 = time.time()
    th = threading.Thread(target=run_long); th.start()
    time.sleep(1.0)
    t = time.time(); r = post(url, short_body); out["short_s"] = time.time() - t
    out["short_tokens"] = r["usage"]["completion_tokens"]
    th.join()
    out["total_s"] = time.time() - t0
    out["agg_tok_s"] = (out["long_tokens"] + out["short_tokens"]) / out["total_s"]
    return out

results = {1: [], 2: []}
for rep in range(REPS):
    for parallel in (1, 2):
        p, url = start(parallel)
        try:
            post(url, {"prompt": "warm up the cache", "max_tokens": 64, "temperature": 0})
            r = scenario(url)
            results[parallel].append(r)
            print(f"rep {rep} parallel {parallel}: {r}", flush=True)
        finally:
            p.terminate(); p.wait()
for parallel, rs in results.items():
    for key in ("short_s", "long_s", "agg_tok_s"):
        v = [r[key] for r in rs]
        print(f"parallel {parallel} {key}: median {statistics.median(v):.2f} range {min(v):.2f}..{max(v):.2f}")
