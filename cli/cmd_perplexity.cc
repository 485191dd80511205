// perplexity: how well the model predicts a text file, the figure
// llama.cpp's llama-perplexity reports. The file is read as raw bytes (no
// newline trimming) and tokenized as plain text without BOS; from position
// 0 each token's log-probability given the ones before it is taken from
// Session::Score (one prompt pass; softmax at temperature 1, in double):
//   perplexity = exp( -1/(N-1) * sum_{i=0}^{N-2} log p(t_{i+1} | context) ).
// A text that fits --ctx is one pass, every token after the first scored
// with everything before it as context. A longer text is scored in
// overlapping windows of --ctx tokens, each starting from an empty state
// half a window after the previous one: the first window scores all its
// tokens, every later one only those the previous did not reach, so each
// token is scored once, with at least ctx/2 tokens of context (the strided
// evaluation of Hugging Face's perplexity guide; llama-perplexity scores
// only the second half of disjoint windows). The output says which.
// Uses only the public API (include/waste/).
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
#include "prompt.h"
#include "report.h"
#include "waste/waste.h"

namespace waste::cli {
namespace {

using Clock = std::chrono::steady_clock;

struct Tally {
  double nll = 0;       // -sum of the log-probabilities scored
  size_t scored = 0;
  size_t windows = 0;
};

// The redrawn stderr line of a long run (a terminal only, not with -q/--json).
class Progress {
 public:
  Progress(const Options& o, size_t total)
      : on_(!o.quiet && !o.json && StderrIsTerminal()), total_(total), start_(Clock::now()) {}
  ~Progress() {
    if (drawn_) std::fprintf(stderr, "\r\x1b[K");
  }
  void Show(const Tally& t) {
    if (!on_ || total_ == 0) return;
    const double s = std::chrono::duration<double>(Clock::now() - start_).count();
    std::fprintf(stderr, "\r%s, running perplexity %.4f\x1b[K",
                 ProgressLine(t.scored, total_, s, "scored").c_str(),
                 t.scored > 0 ? std::exp(t.nll / double(t.scored)) : 0.0);
    drawn_ = true;
  }

 private:
  bool on_;
  size_t total_;
  Clock::time_point start_;
  bool drawn_ = false;
};

// Scores the window ids[begin, end) from an empty state, adding the
// log-probabilities of the tokens at indices >= first_new to `t`, in calls
// of one prompt span (so Ctrl-C is seen within one span's time). False when
// it stopped (Ctrl-C) or failed (reported).
bool ScoreWindow(Engine& engine, const std::vector<int>& ids, size_t begin, size_t end,
                 size_t first_new, const Options& o, Tally* t, Progress* progress) {
  engine.ResetState();
  const size_t span = static_cast<size_t>(kPrefillSpanTokens);
  for (size_t at = begin; at < end; at += span) {
    const size_t n = std::min(span, end - at);
    const int next = at + n < end ? ids[at + n] : -1;
    Result<std::vector<double>> s = engine.Score(std::span<const int>(ids.data() + at, n), next);
    if (!s.has_value()) {
      ReportFailure("score", s.error(), DetailOf(s.error(), engine), o);
      return false;
    }
    // (*s)[j] scores ids[at + j + 1].
    for (size_t j = 0; j < s->size(); ++j) {
      if (at + j + 1 < first_new) continue;
      t->nll -= (*s)[j];
      ++t->scored;
    }
    progress->Show(*t);
    if (Interrupted()) return false;
  }
  ++t->windows;
  return true;
}

}  // namespace

int PerplexityCommand(const Options& o) {
  if (!CheckContainerPath(o)) return 1;
  if (o.positionals.size() < 2) return UsageFailure(o, "missing FILE (the text to score)");
  const std::string& path = o.positionals[1];
  std::string text, why;
  const bool ok = path == "-" ? ReadStdinText(&text, &why) : ReadFileText(path, &text, &why, "text file");
  if (!ok) return UsageFailure(o, "cannot read " + why);

  std::unique_ptr<Engine> engine = OpenEngine(o);
  if (!engine) return 1;
  if (!engine->info().has_tokenizer) return Failure(o, "unsupported", "perplexity: " + NoTokenizer(o));
  Result<std::vector<int>> tokenized = engine->Tokenize(text, /*markup=*/false, /*add_bos=*/false);
  if (!tokenized.has_value()) {
    ReportFailure("tokenize", tokenized.error(), DetailOf(tokenized.error(), *engine), o);
    return 1;
  }
  const std::vector<int>& ids = *tokenized;
  if (ids.size() < 2) {
    return Failure(o, "invalid_argument",
                   path + ": needs at least 2 tokens to score, has " + std::to_string(ids.size()));
  }

  InstallInterruptHandlers();
  const size_t ctx = std::max<size_t>(2, o.ctx);
  const size_t stride = std::max<size_t>(1, ctx / 2);
  const bool windowed = ids.size() > ctx;
  Progress progress(o, ids.size() - 1);
  Tally tally;
  const auto start = Clock::now();
  bool stopped = false;
  for (size_t begin = 0, scored_to = 1;; begin += stride) {
    const size_t end = std::min(begin + ctx, ids.size());
    if (!ScoreWindow(*engine, ids, begin, end, scored_to, o, &tally, &progress)) {
      if (!Interrupted()) return 1;
      stopped = true;
      break;
    }
    scored_to = end;
    if (end == ids.size()) break;
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (tally.scored == 0) return InterruptExitCode();
  const double mean = tally.nll / double(tally.scored);
  const double ppl = std::exp(mean);

  if (o.json) {
    Json j;
    j["file"] = path;
    j["tokens"] = ids.size();
    j["scored"] = tally.scored;
    j["mean_nll"] = mean;
    j["perplexity"] = ppl;
    j["seconds"] = seconds;
    j["windows"] = tally.windows;
    j["window_tokens"] = windowed ? ctx : ids.size();
    j["complete"] = !stopped;
    std::printf("%s\n", DumpJson(j).c_str());
  } else {
    std::string how = windowed ? ", in " + std::to_string(tally.windows) + " windows of " +
                                     std::to_string(ctx) + " tokens, each token with at least " +
                                     std::to_string(ctx - stride) + " before it"
                               : "";
    std::printf("perplexity %.4f over %zu scored tokens (%zu in %s%s), mean NLL %.4f nats, %.1f s%s\n",
                ppl, tally.scored, ids.size(), path.c_str(), how.c_str(), mean, seconds,
                stopped ? " — stopped early: the figure covers the tokens scored so far" : "");
  }
  return stopped ? InterruptExitCode() : 0;
}

}  // namespace waste::cli
