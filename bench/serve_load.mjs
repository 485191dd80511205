// Load benchmark for `waste serve` on loopback (never part of the test
// suite): N concurrent clients x M streamed chat requests each. Reports
// lost or malformed replies, p50/p99 time to first token, tokens/s and the
// server's peak RSS from /metrics. Bounded: at most N*M requests and
// --max-tokens tokens each.
// Usage: node bench/serve_load.mjs WASTE CONTAINER [N=4] [M=8] [MAX_TOKENS=32]
import { spawn } from "node:child_process";

const [waste, container, n = "4", m = "8", maxTokens = "32"] = process.argv.slice(2);
const N = Number(n), M = Number(m), MAX = Number(maxTokens);
const child = spawn(waste, ["serve", container, "--host", "127.0.0.1", "--port", "0",
                            "--queue", String(N * 2)], { stdio: ["ignore", "pipe", "ignore"] });
const url = await new Promise((resolve, reject) => {
  let out = "";
  child.stdout.on("data", d => {
    out += d;
    const mm = out.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
    if (mm) resolve(mm[1]);
  });
  child.on("exit", c => reject(new Error("server exited " + c)));
});

const ttft = [], rates = [];
let ok = 0, bad = 0, tokens = 0;
async function one(i) {
  const t0 = performance.now();
  const r = await fetch(url + "/v1/chat/completions", {
    method: "POST", headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ messages: [{ role: "user", content: "Request " + i }], max_tokens: MAX,
                           stream: true, stream_options: { include_usage: true } }) });
  // Read the stream as it comes: the first delta with text marks the
  // time to first token.
  const reader = r.body.getReader();
  const decoder = new TextDecoder();
  let text = "", first = 0;
  for (;;) {
    const { value, done: end } = await reader.read();
    if (end) break;
    text += decoder.decode(value, { stream: true });
    if (!first && /"(content|reasoning_content)": "[^"]/.test(text)) first = performance.now();
  }
  let usage = null, done = false;
  for (const block of text.split("\n\n")) {
    if (!block.startsWith("data: ")) continue;
    const data = block.slice(6);
    if (data === "[DONE]") { done = true; continue; }
    const j = JSON.parse(data);
    if (j.usage) usage = j.usage;
  }
  const t1 = performance.now();
  if (r.status === 200 && done && usage) {
    ok++;
    tokens += usage.completion_tokens;
    ttft.push((first || t1) - t0);
    rates.push(usage.completion_tokens / ((t1 - t0) / 1000));
  } else {
    bad++;
  }
}
const start = performance.now();
await Promise.all(Array.from({ length: N }, async (_, c) => {
  for (let k = 0; k < M; k++) await one(c * M + k);
}));
const wall = (performance.now() - start) / 1000;
const metrics = await (await fetch(url + "/metrics")).text();
const ttftSum = Number(metrics.match(/^waste_time_to_first_token_ms_sum (\S+)/m)[1]);
const gens = Number(metrics.match(/^waste_generations_total (\S+)/m)[1]);
const rss = Number(metrics.match(/^waste_peak_rss_bytes (\S+)/m)[1]);
child.kill("SIGINT");
const pct = (a, p) => a.sort((x, y) => x - y)[Math.min(a.length - 1, Math.floor(p * a.length))];
console.log(JSON.stringify({
  clients: N, requests_each: M, ok, lost_or_malformed: bad, wall_s: +wall.toFixed(2),
  tokens_per_s_total: +(tokens / wall).toFixed(1),
  ttft_ms_p50: +pct(ttft, 0.5).toFixed(1), ttft_ms_p99: +pct(ttft, 0.99).toFixed(1),
  per_request_tok_s_p50: +pct(rates, 0.5).toFixed(1),
  server_mean_ttft_ms: +(ttftSum / gens).toFixed(2),
  peak_rss_mib: +(rss / 1048576).toFixed(1),
}));
