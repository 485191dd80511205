// What run, chat and bench share around Engine::Generate: sampler settings
// from the options (with the seed chosen once), the per-token tallies and
// timings behind the statistics line, the prefill progress line, and
// Ctrl-C / SIGTERM, which stop the prompt or the generation at the next
// chunk or token instead of killing the process.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>

#include "options.h"
#include "report.h"
#include "waste/engine.h"

namespace waste::cli {

// --seed when given; else a random one when sampling (--temp > 0), so two
// runs differ; else 0 (greedy ignores it).
uint64_t ChooseSeed(const Options& options);
GenParams ParamsFromOptions(const Options& options, uint64_t seed);

struct TokenTally {
  uint64_t tokens = 0;  // callbacks received, including one a stop string ended in
  double ms = 0;        // sum of per-token step times
  uint64_t hit = 0;
  uint64_t miss = 0;
  uint64_t bytes = 0;

  void Add(const TokenEvent& e) {
    ++tokens;
    ms += e.ms_total;
    hit += e.experts_hit;
    miss += e.experts_missed;
    bytes += e.bytes_read;
  }
};

// SIGINT and SIGTERM set a flag (and nothing else) once installed; the
// callbacks below read it.
void InstallInterruptHandlers();
bool Interrupted();
void ClearInterrupt();
// 130 after SIGINT, 143 after SIGTERM (128 + the signal), 0 when none came.
int InterruptExitCode();
// At chat's prompt a Ctrl-C leaves at once (exit 130), as in a shell; while
// a reply is being made it only stops the reply.
void SetExitOnInterrupt(bool exit_now);

using Clock = std::chrono::steady_clock;

// One Generate call, timed: set `params.on_prefill` through Watch(), call
// FirstToken() in the token callback, then Finish() with the engine's
// statistics from before and after.
class GenerationTimer {
 public:
  // `progress`: draw "prompt 128/2291 tokens (5%), ..., ETA" on stderr
  // (callers pass true only when stderr is a terminal and output is not
  // quiet or JSON).
  explicit GenerationTimer(bool progress);
  // Installs the prefill callback: progress line, and cancel on Ctrl-C.
  void Watch(GenParams* params);
  // In the token callback: notes the first token's time.
  void Token();
  // Prompt tokens are the ones the engine fed (Stats::prefill_tokens).
  RunTimings Finish(const Stats& before, const Stats& after, const TokenTally& tally) const;
  double first_token_s() const { return first_token_s_; }

 private:
  bool progress_;
  bool drew_ = false;
  Clock::time_point start_;
  double first_token_s_ = 0;
  bool have_first_ = false;
};

// True when stderr is a terminal (progress lines, escapes).
bool StderrIsTerminal();

}  // namespace waste::cli
