// Prompt-lookup drafting on a reply that repeats its context with edits —
// what an agent rewriting a file it was sent produces — on any container,
// random weights included (docs/DRAFTING.md "Measured").
//
// The prompt is a text file's tokens; the reply is forced, token by token,
// to the same tokens with one token changed every --edit-every tokens (a
// constraint that allows only the next target token, so the model's own
// preferences do not matter, while every forward pass is the real one).
// Drafting guesses from the prompt and the reply as it would for a real
// model; the guesses that match the target are kept. Each round runs the
// reply without drafting and with it, alternating, on fresh sessions of one
// open model, and prints decode tok/s, bytes read per token and guesses kept.
// With --predict 1 the file is not in the prompt (its first 16 tokens stand
// for an instruction) but sent as the reply's prediction
// (GenParams::draft_prediction, the server's `prediction`): each round then
// also runs drafting without the prediction.
//
//   draft_replay MODEL FILE [--draft K] [--edit-every E] [--reply N]
//                [--budget BYTES] [--rounds R] [--threads T] [--predict 0|1]
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include "waste/grammar.h"
#include "waste/model.h"

namespace {

using waste::Config;
using waste::GenParams;
using waste::Model;
using waste::Session;
using waste::Stats;

// Only target[i] may come next.
class Forced : public waste::TokenConstraint {
 public:
  explicit Forced(const std::vector<int>& target) : target_(target) {}
  bool Allows(int token) noexcept override { return i_ < target_.size() && token == target_[i_]; }
  void Mask(std::span<float> logits) noexcept override {
    for (size_t t = 0; t < logits.size(); ++t) {
      if (!Allows(static_cast<int>(t))) logits[t] = -INFINITY;
    }
  }
  void Accept(int) noexcept override { ++i_; }

 private:
  const std::vector<int>& target_;
  size_t i_ = 0;
};

struct Result {
  std::vector<std::pair<std::string, double>>
      phases;  // WASTE_PROFILE=1: seconds per phase, this reply
  double decode_s = 0;
  uint64_t tokens = 0, bytes = 0, guessed = 0, kept = 0, passes = 0;
};

Result Reply(Model& model, const std::vector<int>& prompt, const std::vector<int>& target,
             int draft, std::span<const int> prediction = {}) {
  auto s = model.NewSession();
  if (!s) {
    std::fprintf(stderr, "session: %s\n", s.error().ToString().c_str());
    std::exit(1);
  }
  Forced forced(target);
  GenParams p;
  p.max_tokens = static_cast<int>(target.size());
  p.ignore_eos = true;
  p.constraint = &forced;
  p.draft_tokens = draft;
  p.draft_prediction = prediction;
  // The prompt's experts are read before the clock starts counting decode:
  // the figures are the reply's.
  Stats before;
  bool first = true;
  Result r;
  auto done = (*s)->Generate(prompt, p, [&](const waste::TokenEvent& ev) {
    if (first) {
      before = (*s)->stats();
      first = false;
    } else {
      r.decode_s += ev.ms_total / 1000.0;
      ++r.tokens;
    }
    return true;
  });
  if (!done) {
    std::fprintf(stderr, "generate: %s\n", done.error().ToString().c_str());
    std::exit(1);
  }
  const Stats after = (*s)->stats();
  for (size_t i = 0; i < after.phase_seconds.size(); ++i) {
    const double was = i < before.phase_seconds.size() ? before.phase_seconds[i].second : 0.0;
    r.phases.emplace_back(after.phase_seconds[i].first, after.phase_seconds[i].second - was);
  }
  r.bytes = after.bytes_read - before.bytes_read;
  r.guessed = after.draft_tokens - before.draft_tokens;
  r.kept = after.draft_accepted - before.draft_accepted;
  r.passes = after.draft_passes - before.draft_passes;
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: draft_replay MODEL FILE [--draft K] [--edit-every E] [--reply N] "
                 "[--budget BYTES] [--rounds R] [--threads T] [--predict 0|1]\n");
    return 2;
  }
  const std::string model_dir = argv[1], file = argv[2];
  int draft = 8, edit_every = 40, reply = 256, rounds = 3, threads = 0, predict = 0;
  uint64_t budget = 0;
  for (int i = 3; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--draft")
      draft = std::atoi(v);
    else if (k == "--edit-every")
      edit_every = std::atoi(v);
    else if (k == "--reply")
      reply = std::atoi(v);
    else if (k == "--rounds")
      rounds = std::atoi(v);
    else if (k == "--threads")
      threads = std::atoi(v);
    else if (k == "--predict")
      predict = std::atoi(v);
    else if (k == "--budget")
      budget = std::strtoull(v, nullptr, 10);
    else {
      std::fprintf(stderr, "unknown option %s\n", k.c_str());
      return 2;
    }
  }
  std::ifstream in(file, std::ios::binary);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Config cfg;
  cfg.ram_budget_bytes = budget;
  cfg.threads = threads;
  cfg.draft_tokens = draft;
  auto model = Model::Open(model_dir, cfg);
  if (!model) {
    std::fprintf(stderr, "open: %s\n", model.error().ToString().c_str());
    return 1;
  }
  auto ids = (*model)->Tokenize(text, false, false);
  if (!ids || ids->empty()) {
    std::fprintf(stderr, "tokenize: %s\n", ids ? "empty text" : ids.error().ToString().c_str());
    return 1;
  }
  const std::vector<int>& file_ids = *ids;
  const std::vector<int> prompt =
      predict ? std::vector<int>(file_ids.begin(),
                                 file_ids.begin() + std::min<size_t>(16, file_ids.size()))
              : file_ids;
  const std::vector<int> none;
  const std::vector<int>& prediction = predict ? file_ids : none;
  const int vocab = (*model)->info().vocab;
  std::vector<int> target(
      file_ids.begin(),
      file_ids.begin() + std::min<size_t>(file_ids.size(), static_cast<size_t>(reply)));
  for (size_t i = static_cast<size_t>(edit_every) / 2; edit_every > 0 && i < target.size();
       i += static_cast<size_t>(edit_every)) {
    target[i] = (target[i] * 7 + 13) % vocab;  // a changed token, then the original text again
  }
  if (prompt.size() + target.size() + 8 > (*model)->info().ctx_tokens) {
    std::fprintf(stderr, "the prompt (%zu) and reply (%zu) do not fit the context (%u)\n",
                 prompt.size(), target.size(), (*model)->info().ctx_tokens);
    return 1;
  }
  std::printf("prompt %zu tokens, reply %zu tokens, an edit every %d, draft %d%s\n", prompt.size(),
              target.size(), edit_every, draft, predict ? ", the file as the prediction" : "");
  // Configurations: (draft length, with the prediction); alternated per round.
  std::vector<std::pair<int, bool>> runs = {{0, false}, {draft, false}};
  if (predict) runs.emplace_back(draft, true);
  for (int round = 0; round < rounds; ++round) {
    std::vector<std::pair<int, bool>> order = runs;
    if (round % 2 == 1) std::reverse(order.begin(), order.end());
    for (const auto& [d, with_prediction] : order) {
      const Result r =
          Reply(**model, prompt, target, d,
                with_prediction ? std::span<const int>(prediction) : std::span<const int>());
      std::printf("round %d draft %2d%s: %7.2f tok/s  %8.1f MB read/token  kept %" PRIu64
                  " of %" PRIu64 " guesses in %" PRIu64 " passes\n",
                  round, d, with_prediction ? " +prediction" : "",
                  r.decode_s > 0 ? double(r.tokens) / r.decode_s : 0.0,
                  r.tokens > 0 ? double(r.bytes) / 1e6 / double(r.tokens) : 0.0, r.kept, r.guessed,
                  r.passes);
      for (const auto& [name, sec] : r.phases) {
        if (sec >= 0.05) std::printf("    %-14s %6.2f s\n", name.c_str(), sec);
      }
      std::fflush(stdout);
    }
  }
  return 0;
}
