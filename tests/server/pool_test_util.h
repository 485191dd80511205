// Shared by the session-pool tests (prefix reuse, follow-on prefill):
// tokens of a text, a fresh prefill's logits, a prepared prompt's logits,
// and bit-for-bit comparison.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "golden_util.h"
#include "session_pool.h"
#include "waste/waste.h"

namespace waste::server::testing {

// The tiny tokenizer container opened with room for `sessions` sessions and
// `marks` rewind marks each (SessionPool::kMarks as `waste serve` opens it).
inline std::unique_ptr<Engine> OpenTiny(uint32_t sessions, int marks) {
  Config cfg;
  cfg.max_sessions = sessions;
  cfg.rewind_marks = marks;
  auto e = Engine::Open(TinyTokContainer(), cfg);
  EXPECT_TRUE(e) << e.error().ToString();
  return e ? std::move(*e) : nullptr;
}

// A text of `n` letters that differs with `salt` (prompts of known length).
inline std::string Text(size_t n, int salt) {
  std::string s(n, 'a');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>('a' + (i * 7 + static_cast<size_t>(salt)) % 26);
  return s;
}

inline std::vector<int> Ids(Engine& e, const std::string& text) {
  auto ids = e.Tokenize(text, false, false);
  EXPECT_TRUE(ids);
  return ids ? *ids : std::vector<int>{};
}

// Fresh prefill of `ids` on its own session: the last position's logits.
inline std::vector<float> Fresh(Session& s, const std::vector<int>& ids) {
  s.Reset();
  auto l = s.Eval(ids);
  EXPECT_TRUE(l);
  return l ? std::vector<float>(l->begin(), l->end()) : std::vector<float>{};
}

// `ids` prepared on the pool (resumed where a slot allows) and the rest
// fed: the last position's logits. *cached gets the tokens resumed,
// *ahead (optional) whether from a follow-on's point, *earlier (optional)
// whether from an earlier point.
inline std::vector<float> Resumed(SessionPool& pool, const std::vector<int>& ids, int* cached,
                                  bool* ahead = nullptr, bool* earlier = nullptr) {
  auto run = pool.Prepare(ids);
  EXPECT_TRUE(run) << run.error().ToString();
  if (!run) return {};
  *cached = run->cached_tokens;
  if (ahead != nullptr) *ahead = run->resumed_ahead;
  if (earlier != nullptr) *earlier = run->resumed_earlier;
  auto l = run->session->Eval(run->rest);
  EXPECT_TRUE(l);
  return l ? std::vector<float>(l->begin(), l->end()) : std::vector<float>{};
}

// `n` greedy tokens generated after feeding `ids` to `s` (empty when
// Generate fails, which the caller's comparison then shows).
inline std::vector<int> Greedy(Session& s, std::span<const int> ids, int n) {
  GenParams p;
  p.temperature = 0;
  p.max_tokens = n;
  std::vector<int> out;
  auto done = s.Generate(ids, p, [&](const TokenEvent& ev) {
    out.push_back(ev.token);
    return true;
  });
  EXPECT_TRUE(done) << done.error().ToString();
  return out;
}

inline bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && !a.empty() &&
         std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace waste::server::testing
