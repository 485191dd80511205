#include "generation.h"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "host.h"

namespace waste::cli {
namespace {

// Lock-free atomics are safe to touch from a signal handler.
std::atomic<int> g_signal{0};
std::atomic<bool> g_exit_now{false};

extern "C" void OnInterrupt(int sig) {
  // Some C libraries reset the handler to the default on delivery.
  std::signal(sig, OnInterrupt);
  if (g_exit_now.load()) {
    // Leaving from a prompt: end the line the shell prompt would follow
    // (write(2) is async-signal-safe; stdio is not).
    EndTerminalLineFromSignal();
    std::_Exit(128 + sig);
  }
  g_signal.store(sig);
}

}  // namespace

uint64_t ChooseSeed(const Options& o) {
  if (o.seed_given) return o.seed;
  if (o.temp <= 0.0f) return 0;
  std::random_device rd;
  uint64_t seed = (uint64_t{rd()} << 32) ^ rd();
  return seed != 0 ? seed : 1;  // 0 would mean "the fixed default"
}

GenParams ParamsFromOptions(const Options& o, uint64_t seed) {
  GenParams p;
  p.max_tokens = static_cast<int>(o.n_tokens > 0x7fffffffu ? 0x7fffffffu : o.n_tokens);
  p.temperature = o.temp;
  p.top_p = o.top_p;
  p.top_k = o.top_k;
  p.seed = seed;
  p.min_p = o.min_p;
  p.repeat_penalty = o.repeat_penalty;
  p.repeat_last_n = o.repeat_last_n;
  p.presence_penalty = o.presence_penalty;
  p.frequency_penalty = o.frequency_penalty;
  p.ignore_eos = o.ignore_eos;
  p.logit_bias = o.logit_bias;
  return p;
}

void InstallInterruptHandlers() {
  std::signal(SIGINT, OnInterrupt);
  std::signal(SIGTERM, OnInterrupt);
}
bool Interrupted() { return g_signal.load() != 0; }
void ClearInterrupt() { g_signal.store(0); }
int InterruptExitCode() {
  const int sig = g_signal.load();
  return sig == 0 ? 0 : 128 + sig;
}
void SetExitOnInterrupt(bool exit_now) { g_exit_now.store(exit_now); }


GenerationTimer::GenerationTimer(bool progress) : progress_(progress), start_(Clock::now()) {}

void GenerationTimer::Watch(GenParams* params) {
  start_ = Clock::now();
  params->on_prefill = [this](int done, int total) {
    if (progress_ && total > 64) {
      const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
      if (done < total) {
        std::fprintf(stderr, "\r%s\x1b[K", ProgressLine(uint64_t(done), uint64_t(total), elapsed).c_str());
        drew_ = true;
      } else if (drew_) {
        std::fputs("\r\x1b[K", stderr);  // the line goes once the prompt is in
        drew_ = false;
      }
      std::fflush(stderr);
    }
    if (Interrupted()) {
      if (drew_) std::fputs("\r\x1b[K", stderr);
      drew_ = false;
      return false;
    }
    return true;
  };
}

void GenerationTimer::Token() {
  if (have_first_) return;
  have_first_ = true;
  first_token_s_ = std::chrono::duration<double>(Clock::now() - start_).count();
}

RunTimings GenerationTimer::Finish(const Stats& before, const Stats& after,
                                   const TokenTally& tally) const {
  RunTimings t;
  // What was fed: a prompt stopped part way counts its spans read, not its
  // length.
  t.prompt_tokens = after.prefill_tokens - before.prefill_tokens;
  t.prompt_s = after.prefill_s - before.prefill_s;
  t.first_token_s = first_token_s_;
  t.tokens = tally.tokens;
  t.gen_s = tally.ms / 1000.0;
  t.hit = after.experts_hit - before.experts_hit;
  t.miss = after.experts_missed - before.experts_missed;
  t.bytes_read = after.bytes_read - before.bytes_read;
  t.drafted = after.draft_tokens - before.draft_tokens;
  t.draft_kept = after.draft_accepted - before.draft_accepted;
  return t;
}

}  // namespace waste::cli
