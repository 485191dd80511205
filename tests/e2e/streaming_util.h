// Helpers for the streaming tests (issue #5): the generated containers,
// private copies, environment overrides, and a greedy run that keeps every
// step's logits.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "scoped_env.h"
#include "temp_dir.h"
#include "waste/engine.h"

namespace waste::testing {

// kimi-linear-small (64 experts of 0.6 MB in 7 MoE layers, top-8), made at
// build time by waste-gen: its 268 MB of experts exceed every small budget
// the tests use.
inline std::string StreamingContainer() { return WASTE_STREAMING_CONTAINER; }

// A private copy of a container: every file symlinked except usage.waste,
// so a test's hotlist never leaks into another's (and 268 MB are not copied).
class LinkedCopy : public TempDir {
 public:
  explicit LinkedCopy(const std::string& src) {
    for (const auto& e : std::filesystem::directory_iterator(src)) {
      std::string name = e.path().filename().string();
      if (name == "usage.waste") continue;
      std::filesystem::create_symlink(std::filesystem::absolute(e.path()), *this / name);
    }
  }
};


inline std::vector<int> TestPrompt(int vocab, size_t n = 6) {
  std::vector<int> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = static_cast<int>((i * 7919u + 13u) % static_cast<uint32_t>(vocab));
  return ids;
}

struct RunOutput {
  std::vector<std::vector<float>> logits;   // prompt's last position, then each step
  Stats stats;
  MemoryUsage memory;
  std::string error;
};

// Opens `dir` with `cfg`, evaluates the prompt (chunked prefill), then feeds
// the argmax one token at a time for `steps` steps (the decode path, with
// hints and the router lookahead), keeping every step's logits.
inline RunOutput GreedyRun(const std::string& dir, const Config& cfg, int steps,
                           size_t prompt_tokens = 6) {
  RunOutput out;
  auto opened = Engine::Open(dir, cfg);
  if (!opened) {
    out.error = "open: " + opened.error().ToString();
    return out;
  }
  std::unique_ptr<Engine> e = std::move(*opened);
  std::vector<int> prompt = TestPrompt(e->info().vocab, prompt_tokens);
  auto logits = e->Eval(prompt);
  for (int s = 0;; ++s) {
    if (!logits) {
      out.error = logits.error().ToString() + " / " + e->error_detail();
      break;
    }
    out.logits.emplace_back(logits->begin(), logits->end());
    if (s == steps) break;
    int best = 0;
    for (size_t i = 1; i < logits->size(); ++i) {
      if ((*logits)[i] > (*logits)[static_cast<size_t>(best)]) best = static_cast<int>(i);
    }
    logits = e->Eval(std::span<const int>(&best, 1));
  }
  out.stats = e->stats();
  out.memory = e->memory_used();
  return out;
}

// Bit-for-bit equality of two runs' logits.
inline ::testing::AssertionResult SameBits(const RunOutput& a, const RunOutput& b) {
  if (a.logits.size() != b.logits.size()) {
    return ::testing::AssertionFailure() << "step counts differ: " << a.logits.size() << " vs "
                                         << b.logits.size();
  }
  for (size_t s = 0; s < a.logits.size(); ++s) {
    if (a.logits[s].size() != b.logits[s].size() ||
        std::memcmp(a.logits[s].data(), b.logits[s].data(), a.logits[s].size() * sizeof(float)) !=
            0) {
      return ::testing::AssertionFailure() << "logits differ at step " << s;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace waste::testing
