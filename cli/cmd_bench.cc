// bench, in the manner of llama-bench: a fixed prompt (or --prompt-tokens /
// -p N of it, or --ids), greedy unless --temp, -n tokens (default 64),
// --reps times (the state reset between, the expert cache kept warm); a
// "pp N" row (prompt processing) and a "tg N" row (generation) with the
// mean and sample standard deviation of the repetitions' tok/s (as
// llama-bench prints them) and their median and range (what a noisy shared
// machine needs, and the first, cold repetition cannot skew), as a
// markdown table (-o md), CSV (-o csv) or JSON (-o json / --json: one
// object, the detailed keys of the last repetition plus "rows"). Fields:
// docs/CLI.md "bench". tok_per_s keeps its old definition (tokens over the
// whole Generate, prefill included).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "engine_setup.h"
#include "generation.h"
#include "host.h"
#include "report.h"
#include "waste/waste.h"

namespace waste::cli {
namespace {

constexpr char kBenchPrompt[] =
    "Write a C function that parses a JSON array of integers and explain its edge cases.";

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

double Rate(double count, double seconds) { return seconds > 0 ? count / seconds : 0.0; }
double Round(double v, double scale) { return std::round(v * scale) / scale; }

// The prompt ids: --ids, else the fixed prompt (repeated or cut to
// --prompt-tokens). Without a tokenizer only --prompt-tokens can make one:
// synthetic ids, so a tokenizer-less container can still be measured.
bool BenchPrompt(const Engine& engine, const Options& o, std::vector<int>* ids) {
  if (o.ids_given) {
    *ids = o.ids;
    return !ids->empty();
  }
  Result<std::vector<int>> base = engine.Tokenize(kBenchPrompt, /*markup=*/false, false);
  if (!base.has_value() || base->empty()) {
    if (o.prompt_tokens == 0 || engine.info().vocab <= 0) {
      Status why = base.has_value() ? ArgError("empty prompt") : base.error();
      ReportFailure("tokenize", why, DetailOf(why, engine), o);
      return false;
    }
    ids->resize(o.prompt_tokens);
    const uint32_t vocab = static_cast<uint32_t>(engine.info().vocab);
    for (uint32_t i = 0; i < o.prompt_tokens; ++i) (*ids)[i] = int((i * 7919u + 13u) % vocab);
    return true;
  }
  *ids = *base;
  if (o.prompt_tokens > 0) {
    ids->clear();
    while (ids->size() < o.prompt_tokens) ids->insert(ids->end(), base->begin(), base->end());
    ids->resize(o.prompt_tokens);
  }
  return true;
}

// One pp or tg row: the rate of each repetition.
struct Row {
  std::string test;  // "pp 19", "tg 64"
  std::vector<double> rates;
  double Mean() const {
    double s = 0;
    for (double r : rates) s += r;
    return rates.empty() ? 0.0 : s / double(rates.size());
  }
  double Spread() const {  // sample standard deviation (0 for one repetition)
    if (rates.size() < 2) return 0.0;
    const double m = Mean();
    double s = 0;
    for (double r : rates) s += (r - m) * (r - m);
    return std::sqrt(s / double(rates.size() - 1));
  }
  double Median() const {
    if (rates.empty()) return 0.0;
    std::vector<double> sorted = rates;
    std::sort(sorted.begin(), sorted.end());
    const size_t n = sorted.size();
    return n % 2 == 1 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
  }
  double Min() const { return rates.empty() ? 0.0 : *std::min_element(rates.begin(), rates.end()); }
  double Max() const { return rates.empty() ? 0.0 : *std::max_element(rates.begin(), rates.end()); }
};

std::string Table(const std::vector<Row>& rows, const std::string& format, const std::string& model,
                  const std::string& budget, int threads, int reps) {
  std::string out;
  if (format == "csv") {
    out = "model,budget,threads,reps,test,tok_per_s,stddev,median,min,max\n";
    for (const Row& r : rows) {
      out += fmt::format("{},{},{},{},{},{:.4f},{:.4f},{:.4f},{:.4f},{:.4f}\n", model, budget,
                         threads, reps, r.test, r.Mean(), r.Spread(), r.Median(), r.Min(), r.Max());
    }
    return out;
  }
  out =
      "| model | budget | threads | test | t/s | median (range) |\n"
      "| --- | ---: | ---: | ---: | ---: | ---: |\n";
  for (const Row& r : rows) {
    out += fmt::format("| {} | {} | {} | {} | {:.2f} ± {:.2f} | {:.2f} ({:.2f}..{:.2f}) |\n", model,
                       budget, threads, r.test, r.Mean(), r.Spread(), r.Median(), r.Min(), r.Max());
  }
  return out;
}

std::string BaseName(std::string path) {
  while (path.size() > 1 && path.back() == '/') path.pop_back();
  size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int BenchCommand(const Options& o) {
  InstallInterruptHandlers();
  // How busy the machine was: the 1-minute load before the bench's own
  // threads count, and after them (quoted with any figure from a shared box).
  const double load_before = waste::LoadAverage();
  std::unique_ptr<Engine> engine = OpenEngine(o);
  if (!engine) return 1;
  const std::string format = o.output_format.empty() ? "md" : o.output_format;
  PrintOpenNotes(*engine, o, /*budget_note=*/false);
  const bool json = format == "json";
  std::vector<int> prompt;
  if (!BenchPrompt(*engine, o, &prompt)) return 1;
  // A row must measure what its label says: the prompt and every token of
  // -n have to fit (the engine would stop at a full context, and a "tg 5000"
  // row would time 56 tokens).
  if (prompt.size() + o.n_tokens > o.ctx) {
    return UsageFailure(o, fmt::format("the prompt ({} tokens) and -n {} need {} positions but the "
                                       "context holds {}: raise --ctx (e.g. --ctx {}) or lower -n "
                                       "or -p",
                                       prompt.size(), o.n_tokens, prompt.size() + o.n_tokens, o.ctx,
                                       prompt.size() + o.n_tokens));
  }
  if (format == "md") {
    std::printf("%s\n  expert cache %s, prompt %zu tokens, %u generated, %d repetition%s\n\n",
                BuildInfo().c_str(), FormatSize(engine->memory_used().expert_cache_bytes).c_str(),
                prompt.size(), o.n_tokens, o.reps, o.reps == 1 ? "" : "s");
    std::fflush(stdout);
  }

  Row pp{"pp " + std::to_string(prompt.size()), {}};
  Row tg{"tg " + std::to_string(o.n_tokens), {}};
  const Stats before = engine->stats();
  TokenTally tally;  // the last repetition's decode steps
  Stats at_first;    // the counters when prefill has finished (decode-only figures)
  Stats rep_before = before;
  Status status = Status::Ok();
  const uint64_t seed = ChooseSeed(o);
  for (int rep = 0; rep < o.reps && !Interrupted(); ++rep) {
    if (rep > 0) engine->ResetState();  // same prompt again, the cache kept warm
    rep_before = engine->stats();
    tally = TokenTally{};
    GenParams params = ParamsFromOptions(o, seed);
    // Progress line on a terminal (long prompts), cancel on Ctrl-C.
    GenerationTimer timer(format == "md" && StderrIsTerminal());
    timer.Watch(&params);
    const Result<FinishReason> finished =
        engine->Generate(prompt, params, [&](const TokenEvent& e) {
          if (tally.tokens == 0) at_first = engine->stats();
          tally.Add(e);
          return !Interrupted();
        });
    status = finished ? Status::Ok() : finished.error();
    if (Interrupted()) break;
    if (!status.ok()) {
      ReportFailure("generate", status, DetailOf(status, *engine), o);
      return 1;
    }
    const Stats now = engine->stats();
    pp.rates.push_back(Rate(double(now.prefill_tokens - rep_before.prefill_tokens),
                            now.prefill_s - rep_before.prefill_s));
    tg.rates.push_back(Rate(double(now.tokens_generated - rep_before.tokens_generated),
                            now.decode_s - rep_before.decode_s));
    if (!json && format == "md" && o.reps > 1 && StderrIsTerminal()) {
      std::fprintf(stderr, "\rrepetition %d/%d\x1b[K", rep + 1, o.reps);
      if (rep + 1 == o.reps) std::fputs("\r\x1b[K", stderr);
    }
  }
  const int exit_code = Interrupted() ? InterruptExitCode() : 0;
  if (exit_code != 0) std::fputs("\nwaste: cancelled; the rows cover the finished repetitions\n", stderr);
  const Stats after = engine->stats();
  const std::string budget = FormatGb(engine->memory_used().budget_bytes);
  // The first generated token comes from the prompt's logits: with -n 1 no
  // generation step runs, so there is no tg rate to show (llama-bench's
  // -n 0 likewise drops the row) rather than one token over microseconds.
  const bool generation_measured = o.n_tokens >= 2;
  std::vector<Row> rows = {pp};
  if (generation_measured) rows.push_back(tg);
  if (!json) {
    std::fputs(Table(rows, format, BaseName(o.model()), budget, engine->threads(),
                     int(pp.rates.size())).c_str(), stdout);
    if (format == "csv") return exit_code;
    std::printf("\n");
  }
  const Stats last = rep_before;  // the last repetition's starting counters
  (void)last;
  const uint64_t tokens = after.tokens_generated - rep_before.tokens_generated;
  double sec_total = after.sec_total - rep_before.sec_total;
  // Prefill and decode apart: the engine's own timers when it keeps them,
  // else ours (prefill = until the first token, minus that token's step).
  double prefill_s = after.prefill_s - rep_before.prefill_s;
  double decode_s = after.decode_s - rep_before.decode_s;
  uint64_t prefill_tokens = after.prefill_tokens - rep_before.prefill_tokens;
  if (prefill_tokens == 0) prefill_tokens = prompt.size();

  const double tok_per_s = Rate(double(tokens), sec_total);
  const uint64_t lookups = after.experts_hit + after.experts_missed;
  const double hit_rate = lookups > 0 ? double(after.experts_hit) / double(lookups) : 0.0;
  // Achieved read bandwidth: bytes over the wall time with at least one
  // read in flight (warm-up reads included in both), not over the time the
  // compute thread waited (that is read_wait_s).
  const uint64_t decode_lookups = tally.hit + tally.miss;
  const double decode_hit_rate =
      decode_lookups > 0 ? double(tally.hit) / double(decode_lookups) : 0.0;
  const double read_gbps = Rate(double(after.io_bytes) / 1e9, after.io_busy_s);

  if (o.json) {
    Json j;
    j["tokens"] = tokens;
    j["tok_per_s"] = Round(tok_per_s, 1e4);
    j["experts_hit"] = after.experts_hit;
    j["experts_missed"] = after.experts_missed;
    j["bytes_read"] = after.bytes_read;
    j["direct_io"] = after.direct_io;
    j["prefill_tokens"] = prefill_tokens;
    j["prefill_s"] = Round(prefill_s, 1e6);
    j["decode_s"] = Round(decode_s, 1e6);
    j["prefill_tok_s"] = Round(Rate(double(prefill_tokens), prefill_s), 1e4);
    if (generation_measured) j["decode_tok_s"] = Round(Rate(double(tokens), decode_s), 1e4);
    j["hit_rate"] = Round(hit_rate, 1e6);
    j["read_seconds"] = Round(after.io_busy_s, 1e6);
    j["read_gbps"] = Round(read_gbps, 1e4);
    j["read_wait_s"] = Round(after.sec_io, 1e6);
    j["read_waits"] = after.read_waits;
    j["reads"] = after.io_reads;
    j["bytes_per_token"] = tokens > 0 ? after.bytes_read / tokens : 0;
    // The decode steps alone (prefill's chunk reads excluded).
    j["decode_hit_rate"] = Round(decode_hit_rate, 1e6);
    j["decode_bytes_per_token"] = tokens > 0 ? tally.bytes / tokens : 0;
    j["decode_read_wait_s"] = Round(after.sec_io - at_first.sec_io, 1e6);
    j["decode_read_seconds"] = Round(after.io_busy_s - at_first.io_busy_s, 1e6);
    j["decode_read_gbps"] = Round(Rate(double(after.io_bytes - at_first.io_bytes) / 1e9,
                                       after.io_busy_s - at_first.io_busy_s), 1e4);
    j["evictions"] = after.evictions;
    j["prefetched"] = after.prefetched;
    j["spec_reads"] = after.spec_reads;
    j["spec_used"] = after.spec_used;
    j["draft_tokens"] = after.draft_tokens - at_first.draft_tokens;      // --draft: guessed
    j["draft_accepted"] = after.draft_accepted - at_first.draft_accepted;  // and kept
    j["warm_reads"] = after.warm_reads;
    j["io_backend"] = after.io_backend;
    j["io_threads"] = after.io_threads;
    j["io_depth"] = after.io_depth;
    j["io_fixed_buffers"] = after.io_fixed_buffers;
    j["cache_policy"] = after.cache_policy;
    j["huge_pages"] = after.huge_pages;
    j["cache_slots"] = engine->memory_used().slots;
    j["expert_cache_bytes"] = engine->memory_used().expert_cache_bytes;
    if (!after.phase_seconds.empty()) {
      Json phases;
      for (const auto& [name, seconds] : after.phase_seconds) phases[name] = Round(seconds, 1e6);
      j["phase_seconds"] = phases;
    }
    j["backend"] = engine->backend_name();
    j["threads"] = engine->threads();
    j["peak_rss_bytes"] = waste::PeakRssBytes();
    if (load_before >= 0) {
      j["load_average_before"] = Round(load_before, 100);
      j["load_average_after"] = Round(waste::LoadAverage(), 100);
    }
    j["reps"] = pp.rates.size();
    Json json_rows = Json::array();
    for (const Row& r : rows) {
      Json row;
      row["test"] = r.test;
      row["tok_per_s"] = Round(r.Mean(), 1e4);
      row["stddev"] = Round(r.Spread(), 1e4);
      row["median"] = Round(r.Median(), 1e4);
      row["min"] = Round(r.Min(), 1e4);
      row["max"] = Round(r.Max(), 1e4);
      row["samples"] = r.rates;
      json_rows.push_back(row);
    }
    j["rows"] = json_rows;
    if (exit_code != 0) j["finish"] = "cancelled";
    std::printf("%s\n", DumpJson(j).c_str());
    return exit_code;
  }
  std::printf("  last repetition: %.2f tok/s over prompt and generation (%.0f ms/token)\n",
              tok_per_s, tok_per_s > 0 ? 1000.0 / tok_per_s : 0.0);
  if (!after.direct_io) std::printf("  note      %s\n", kPageCacheNote);
  std::printf("  experts   %llu hit / %llu miss = %.1f%% hit\n",
              static_cast<unsigned long long>(after.experts_hit),
              static_cast<unsigned long long>(after.experts_missed), 100.0 * hit_rate);
  std::printf("  disk      %.2f GiB total, %.3f GiB/token\n", double(after.bytes_read) / kGiB,
              tokens > 0 ? double(after.bytes_read) / kGiB / double(tokens) : 0.0);
  std::printf("  prefill   %llu tokens, %.2f tok/s\n",
              static_cast<unsigned long long>(prefill_tokens),
              Rate(double(prefill_tokens), prefill_s));
  if (generation_measured) {
    std::printf("  decode    %.2f tok/s (%.0f ms/token), %.1f%% hit, %.3f GiB/token\n",
                Rate(double(tokens), decode_s),
                tokens > 0 ? 1000.0 * decode_s / double(tokens) : 0.0, 100.0 * decode_hit_rate,
                tokens > 0 ? double(tally.bytes) / kGiB / double(tokens) : 0.0);
  } else {
    std::printf("  decode    no generation step (the one token came from the prompt's logits; "
                "-n 2 or more measures decoding)\n");
  }
  std::printf("  reads     %s, %d thread%s, depth %d%s, %.2f s busy, %.2f GB/s, %.2f s blocked\n",
              after.io_backend.c_str(), after.io_threads, after.io_threads == 1 ? "" : "s",
              after.io_depth, after.io_fixed_buffers ? ", fixed buffers" : "", after.io_busy_s,
              read_gbps, after.sec_io);
  std::printf("  cache     %s, %llu slots%s, lookahead %llu reads / %llu used, %llu warmed\n",
              after.cache_policy.c_str(),
              static_cast<unsigned long long>(engine->memory_used().slots),
              after.huge_pages ? " in huge pages" : "",
              static_cast<unsigned long long>(after.spec_reads),
              static_cast<unsigned long long>(after.spec_used),
              static_cast<unsigned long long>(after.warm_reads));
  std::printf("  memory    peak RSS %.2f GiB\n", double(waste::PeakRssBytes()) / kGiB);
  if (load_before >= 0) {
    std::printf("  host      load average %.2f before, %.2f after (1 minute; the bench's own threads count)\n",
                load_before, waste::LoadAverage());
  }
  if (!after.phase_seconds.empty()) {
    std::printf("  profile  ");
    for (const auto& [name, seconds] : after.phase_seconds) {
      if (seconds > 0) std::printf(" %s %.2fs", name.c_str(), seconds);
    }
    std::printf("\n");
  }
  return exit_code;
}

}  // namespace waste::cli
