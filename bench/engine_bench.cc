// Whole-engine compute benchmark (docs/PERFORMANCE.md "Compute"): one
// process opens the container once per backend (the dispatched ISA, then
// WASTE_BACKEND=cpu unless --no-cpu), runs a warm pass of prompt + greedy
// decode so every expert the measured passes touch is already cached, then
// `--reps` measured passes of the same work. Each pass: ResetState, Eval of
// the whole prompt (chunked prefill), then `-n` single-token Evals feeding
// the argmax. Reports per pass: prefill seconds, decode tok/s, expert hit
// rate of that pass, and the WASTE_PROFILE phase seconds (the profiler is
// forced on here), as medians with min..max; then the ratio of the default
// backend against CPU from the same run.
//
//   engine_bench MODEL [--budget 16G] [--prompt-tokens 64] [-n 16] [--reps 3]
//                [--threads 2] [--no-cpu] [--cpu-reps R] [--cpu-only]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <time.h>

#include "waste/engine.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

uint64_t ParseSize(const char* s) {
  char* end = nullptr;
  double v = std::strtod(s, &end);
  switch (end != nullptr ? *end : 0) {
    case 'G': case 'g': v *= 1024.0 * 1024.0 * 1024.0; break;
    case 'M': case 'm': v *= 1024.0 * 1024.0; break;
    case 'K': case 'k': v *= 1024.0; break;
    default: break;
  }
  return static_cast<uint64_t>(v);
}

struct Stat {
  double median = 0, lo = 0, hi = 0;
};

Stat Summarise(std::vector<double> v) {
  Stat s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  s.lo = v.front();
  s.hi = v.back();
  const size_t n = v.size();
  s.median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  return s;
}

double CpuSeconds() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

struct Pass {
  double prefill_s = 0, decode_s = 0, hit_rate = 0;
  double prefill_cpu = 0, decode_cpu = 0;  // process CPU seconds (all threads)
  std::map<std::string, double> prefill_phase, decode_phase;
};

std::map<std::string, double> Phases(const waste::Stats& s) {
  std::map<std::string, double> m;
  for (const auto& [k, v] : s.phase_seconds) m[k] = v;
  return m;
}

std::map<std::string, double> Delta(const std::map<std::string, double>& a,
                                    const std::map<std::string, double>& b) {
  std::map<std::string, double> d;
  for (const auto& [k, v] : b) d[k] = v - (a.count(k) ? a.at(k) : 0.0);
  return d;
}

int Argmax(std::span<const float> l) {
  int best = 0;
  for (size_t i = 1; i < l.size(); ++i)
    if (l[i] > l[static_cast<size_t>(best)]) best = static_cast<int>(i);
  return best;
}

struct Options {
  std::string model;
  uint64_t budget = 16ull << 30;
  int prompt_tokens = 64, decode = 16, reps = 3, cpu_reps = -1, threads = 2;
  bool cpu = true, cpu_only = false;
};

// One pass; returns false on error. `ids` receives the greedy tokens.
bool RunPass(waste::Engine& e, const std::vector<int>& prompt, int n, Pass* p,
             std::vector<int>* ids) {
  e.ResetState();
  const waste::Stats s0 = e.stats();
  const double c0 = CpuSeconds();
  Clock::time_point t0 = Clock::now();
  auto r = e.Eval(prompt);
  if (!r) {
    std::fprintf(stderr, "eval: %s\n", r.error().ToString().c_str());
    return false;
  }
  int next = Argmax(*r);
  Clock::time_point t1 = Clock::now();
  const double c1 = CpuSeconds();
  const waste::Stats s1 = e.stats();
  ids->clear();
  for (int i = 0; i < n; ++i) {
    ids->push_back(next);
    const int tok = next;
    auto d = e.Eval(std::span<const int>(&tok, 1));
    if (!d) {
      std::fprintf(stderr, "eval: %s\n", d.error().ToString().c_str());
      return false;
    }
    next = Argmax(*d);
  }
  Clock::time_point t2 = Clock::now();
  const double c2 = CpuSeconds();
  const waste::Stats s2 = e.stats();
  p->prefill_cpu = c1 - c0;
  p->decode_cpu = c2 - c1;
  p->prefill_s = Seconds(t0, t1);
  p->decode_s = Seconds(t1, t2);
  const double hits = double(s2.experts_hit - s0.experts_hit);
  const double miss = double(s2.experts_missed - s0.experts_missed);
  p->hit_rate = hits + miss > 0 ? hits / (hits + miss) : 1.0;
  p->prefill_phase = Delta(Phases(s0), Phases(s1));
  p->decode_phase = Delta(Phases(s1), Phases(s2));
  return true;
}

struct Result {
  std::string backend;
  Stat prefill_s, decode_tok_s, hit, prefill_compute, prefill_cpu, decode_cpu_ms;
  std::vector<std::pair<std::string, Stat>> prefill_phase, decode_phase;
  std::vector<int> tokens;
};

void PrintStat(const char* name, const Stat& s, const char* unit) {
  std::printf("  %-22s %10.4f %s  (%.4f .. %.4f)\n", name, s.median, unit, s.lo, s.hi);
}

bool Measure(const Options& o, bool force_cpu, int reps, Result* out) {
  waste::Config cfg;
  cfg.ram_budget_bytes = o.budget;
  cfg.threads = o.threads;
  cfg.force_baseline_kernels = force_cpu;
  Clock::time_point t0 = Clock::now();
  auto opened = waste::Engine::Open(o.model, cfg);
  if (!opened) {
    std::fprintf(stderr, "open: %s\n", opened.error().ToString().c_str());
    return false;
  }
  waste::Engine& e = **opened;
  out->backend = e.backend_name();
  std::fprintf(stderr, "[%s] opened in %.1f s, %d threads\n", out->backend.c_str(),
               Seconds(t0, Clock::now()), e.threads());
  std::vector<int> prompt(static_cast<size_t>(o.prompt_tokens));
  const uint32_t vocab = static_cast<uint32_t>(e.info().vocab);
  for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = int((uint32_t(i) * 7919u + 13u) % vocab);

  Pass warm;
  std::vector<int> ids;
  if (!RunPass(e, prompt, o.decode, &warm, &ids)) return false;
  std::fprintf(stderr, "[%s] warm pass: prefill %.2f s, decode %.2f tok/s, hit %.3f\n",
               out->backend.c_str(), warm.prefill_s, o.decode / warm.decode_s, warm.hit_rate);
  std::vector<Pass> passes;
  for (int i = 0; i < reps; ++i) {
    Pass p;
    std::vector<int> again;
    if (!RunPass(e, prompt, o.decode, &p, &again)) return false;
    if (again != ids) std::fprintf(stderr, "[%s] WARNING: greedy tokens differ between passes\n", out->backend.c_str());
    std::fprintf(stderr, "[%s] pass %d: prefill %.3f s, decode %.3f tok/s, hit %.4f\n",
                 out->backend.c_str(), i, p.prefill_s, o.decode / p.decode_s, p.hit_rate);
    passes.push_back(std::move(p));
  }
  out->tokens = ids;
  std::vector<double> pf, dt, hit, pc, pcpu, dcpu;
  std::map<std::string, std::vector<double>> pp, dp;
  for (const Pass& p : passes) {
    pf.push_back(p.prefill_s);
    dt.push_back(o.decode / p.decode_s);
    hit.push_back(p.hit_rate);
    const double rw = p.prefill_phase.count("read_wait") ? p.prefill_phase.at("read_wait") : 0.0;
    pc.push_back(p.prefill_s - rw);
    pcpu.push_back(p.prefill_cpu);
    dcpu.push_back(p.decode_cpu / o.decode * 1000.0);
    for (const auto& [k, v] : p.prefill_phase) pp[k].push_back(v);
    for (const auto& [k, v] : p.decode_phase) dp[k].push_back(v / o.decode * 1000.0);  // ms/token
  }
  out->prefill_s = Summarise(pf);
  out->decode_tok_s = Summarise(dt);
  out->hit = Summarise(hit);
  out->prefill_compute = Summarise(pc);
  out->prefill_cpu = Summarise(pcpu);
  out->decode_cpu_ms = Summarise(dcpu);
  for (auto& [k, v] : pp) out->prefill_phase.emplace_back(k, Summarise(v));
  for (auto& [k, v] : dp) out->decode_phase.emplace_back(k, Summarise(v));
  return true;
}

void Print(const Options& o, const Result& r) {
  std::printf("backend %s  (prompt %d tokens, decode %d tokens)\n", r.backend.c_str(),
              o.prompt_tokens, o.decode);
  PrintStat("prefill", r.prefill_s, "s");
  PrintStat("decode", r.decode_tok_s, "tok/s");
  PrintStat("prefill - read_wait", r.prefill_compute, "s");
  PrintStat("prefill CPU time", r.prefill_cpu, "s");
  PrintStat("decode CPU/token", r.decode_cpu_ms, "ms");
  PrintStat("hit rate", r.hit, "");
  std::printf("  prefill phases (s):\n");
  for (const auto& [k, s] : r.prefill_phase)
    if (s.median > 0) PrintStat(k.c_str(), s, "s");
  std::printf("  decode phases (ms/token):\n");
  for (const auto& [k, s] : r.decode_phase)
    if (s.median > 0) PrintStat(k.c_str(), s, "ms");
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : ""; };
    if (a == "--budget") o.budget = ParseSize(next());
    else if (a == "--prompt-tokens") o.prompt_tokens = std::atoi(next());
    else if (a == "-n") o.decode = std::atoi(next());
    else if (a == "--reps") o.reps = std::atoi(next());
    else if (a == "--cpu-reps") o.cpu_reps = std::atoi(next());
    else if (a == "--threads") o.threads = std::atoi(next());
    else if (a == "--no-cpu") o.cpu = false;
    else if (a == "--cpu-only") o.cpu_only = true;
    else o.model = a;
  }
  if (o.model.empty()) {
    std::fprintf(stderr, "usage: engine_bench MODEL [--budget 16G] [--prompt-tokens 64] [-n 16] "
                         "[--reps 3] [--threads 2] [--no-cpu] [--cpu-reps R] [--cpu-only]\n");
    return 2;
  }
  setenv("WASTE_PROFILE", "1", 1);
  Result best, cpu;
  bool have_best = false, have_cpu = false;
  if (!o.cpu_only) {
    if (!Measure(o, false, o.reps, &best)) return 1;
    have_best = true;
    Print(o, best);
    std::fflush(stdout);
  }
  if (o.cpu || o.cpu_only) {
    if (!Measure(o, true, o.cpu_reps >= 0 ? o.cpu_reps : o.reps, &cpu)) return 1;
    have_cpu = true;
    Print(o, cpu);
  }
  if (have_best && have_cpu) {
    std::printf("ratio %s / CPU: prefill %.2fx faster, decode %.2fx faster; greedy tokens %s\n",
                best.backend.c_str(), cpu.prefill_s.median / best.prefill_s.median,
                best.decode_tok_s.median / cpu.decode_tok_s.median,
                best.tokens == cpu.tokens ? "identical" : "DIFFER");
  }
  return 0;
}
