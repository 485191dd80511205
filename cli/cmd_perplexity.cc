// perplexity: how well the model predicts a text file, the figure
// llama.cpp's llama-perplexity reports. The file is read as raw bytes (no
// newline trimming), tokenized as plain text without BOS, and fed one token
// at a time from position 0; after token i the model's next-token
// distribution (softmax at temperature 1, in double) scores token i+1:
//   perplexity = exp( -1/(N-1) * sum_{i=0}^{N-2} log p(t_{i+1} | t_0..t_i) ).
// One pass over the whole text, no sliding window: the text must fit the
// context (--ctx), else the command refuses rather than score a different
// quantity. Uses only the public API (include/waste/).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "engine_setup.h"
#include "prompt.h"
#include "report.h"
#include "waste/waste.h"

namespace waste::cli {
namespace {

// -log p(target) under softmax(logits), in double.
double NegLogProb(std::span<const float> logits, int target) {
  double max_logit = -INFINITY;
  for (float v : logits) max_logit = std::max(max_logit, double(v));
  double sum = 0;
  for (float v : logits) sum += std::exp(double(v) - max_logit);
  return -(double(logits[static_cast<size_t>(target)]) - max_logit - std::log(sum));
}

}  // namespace

int PerplexityCommand(const Options& o) {
  if (o.positionals.size() < 2) return UsageFailure(o, "missing FILE (the text to score)");
  const std::string& path = o.positionals[1];
  std::string text;
  std::string error;
  if (!ReadFileText(path, &text, &error)) {
    std::fprintf(stderr, "%s\n", error.empty() ? (path + ": cannot read the file").c_str()
                                               : error.c_str());
    return 1;
  }

  std::unique_ptr<Engine> engine = OpenEngine(o);
  if (!engine) return 1;
  Result<std::vector<int>> tokenized = engine->Tokenize(text, /*markup=*/false, /*add_bos=*/false);
  if (!tokenized.has_value()) {
    ReportFailure("tokenize", tokenized.error(), DetailOf(tokenized.error(), *engine), o);
    return 1;
  }
  const std::vector<int>& ids = *tokenized;
  if (ids.size() < 2) {
    std::fprintf(stderr, "%s: needs at least 2 tokens, has %zu\n", path.c_str(), ids.size());
    return 1;
  }
  if (ids.size() > o.ctx) {
    std::fprintf(stderr, "%s: %zu tokens do not fit the context of %u (raise --ctx)\n",
                 path.c_str(), ids.size(), o.ctx);
    return 1;
  }

  const auto start = std::chrono::steady_clock::now();
  double nll = 0;
  for (size_t i = 0; i + 1 < ids.size(); ++i) {
    Result<std::span<const float>> logits = engine->Eval(std::span<const int>(&ids[i], 1));
    if (!logits.has_value()) {
      ReportFailure("eval", logits.error(), DetailOf(logits.error(), *engine), o);
      return 1;
    }
    const int target = ids[i + 1];
    if (target < 0 || static_cast<size_t>(target) >= logits->size()) {
      std::fprintf(stderr, "token id %d is outside the vocabulary\n", target);
      return 1;
    }
    nll += NegLogProb(*logits, target);
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const size_t scored = ids.size() - 1;
  const double ppl = std::exp(nll / double(scored));

  if (o.json) {
    Json j;
    j["file"] = path;
    j["tokens"] = ids.size();
    j["scored"] = scored;
    j["mean_nll"] = nll / double(scored);
    j["perplexity"] = ppl;
    j["seconds"] = seconds;
    std::printf("%s\n", DumpJson(j).c_str());
    return 0;
  }
  std::printf("perplexity %.4f over %zu scored tokens (%zu in %s), mean NLL %.4f nats, %.1f s\n",
              ppl, scored, ids.size(), path.c_str(), nll / double(scored), seconds);
  return 0;
}

}  // namespace waste::cli
