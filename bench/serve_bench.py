# Shared by the `waste serve` measurements in bench/ (follow_on_measure,
# prompt_store_measure, serve_parallel_measure): a server on a free port,
# and JSON posted to it.
import json, re, subprocess, time, urllib.request

def start(waste, model, extra=()):
    """`waste serve MODEL --port 0 --budget 4G EXTRA...`: (process, base URL)."""
    p = subprocess.Popen([waste, "serve", model, "--port", "0", "--budget", "4G", *extra],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    for line in p.stdout:
        m = re.search(r"listening on (http://[0-9.:]+)", line)
        if m:
            return p, m.group(1)
    raise RuntimeError("no listen line")

def post(url, path, body, timeout=900):
    """POST `body` as JSON to url + path: (the reply's object, seconds taken)."""
    req = urllib.request.Request(url + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    t = time.time()
    with urllib.request.urlopen(req, timeout=timeout) as r:
        out = json.loads(r.read())
    return out, time.time() - t
