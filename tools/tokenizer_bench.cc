// tokenizer_bench: tokenizer throughput in MB/s on a large mixed text.
// A measurement, never a test (docs/TOKENIZER.md records the figures).
//
//   tokenizer_bench [--container DIR] [--text FILE] [--mb N]
//
// Defaults: the warp-tiny-tok fixture's tokenizer (49 merges: the worst
// case, nearly every piece goes through the merge loop) plus a synthetic
// ~80k-token vocabulary built from the text (frequent pre-tokens are whole
// tokens, as in a real vocabulary); the text is tests/data/
// tokenizer_corpus.txt lines shuffled and repeated to N MB (default 16).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/pretokenizer.h"
#include "text/tokenizer.h"

namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

uint64_t Next(uint64_t* s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 33;
}

std::string MixedText(const std::string& corpus, size_t bytes) {
  std::vector<std::string> lines;
  std::stringstream ss(corpus);
  for (std::string line; std::getline(ss, line);) lines.push_back(line + "\n");
  std::string text;
  uint64_t s = 1;
  while (text.size() < bytes) text += lines[Next(&s) % lines.size()];
  return text;
}

// 256 bytes, every 2..4-byte substring of a sample, and the 50k most
// frequent pre-tokens of the text (with their 2..4-byte prefixes).
std::vector<waste::RankedToken> SyntheticVocab(const std::string& text) {
  std::set<std::string> seen;
  std::vector<std::string> order;
  const auto add = [&](std::string t) {
    if (seen.insert(t).second) order.push_back(std::move(t));
  };
  const std::string sample = text.substr(0, 1 << 16);
  for (size_t len = 2; len <= 4; ++len) {
    for (size_t i = 0; i + len <= sample.size(); ++i) add(sample.substr(i, len));
  }
  std::unordered_map<std::string, int> freq;
  waste::PreTokenizer::Get().value()->Split(text.substr(0, 4 << 20),
                                            [&](std::string_view p) { ++freq[std::string(p)]; });
  std::vector<std::pair<int, std::string>> by_freq;
  for (auto& [piece, n] : freq) by_freq.emplace_back(-n, piece);
  std::sort(by_freq.begin(), by_freq.end());
  for (size_t i = 0; i < by_freq.size() && i < 50000; ++i) {
    if (by_freq[i].second.size() > 1) add(by_freq[i].second);
  }
  std::vector<waste::RankedToken> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back({std::string(1, static_cast<char>(b)), b});
  for (auto& t : order) {
    if (t.size() > 1) tokens.push_back({t, static_cast<int>(tokens.size())});
  }
  return tokens;
}

// Best of five, timed in thread CPU time so that other load on a shared
// machine does not count (the work is single-threaded).
template <typename F>
double BestMbPerSecond(size_t bytes, F&& f) {
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    timespec t0, t1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t0);
    f();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t1);
    const double s = static_cast<double>(t1.tv_sec - t0.tv_sec) +
                     static_cast<double>(t1.tv_nsec - t0.tv_nsec) * 1e-9;
    best = std::max(best, static_cast<double>(bytes) / 1e6 / s);
  }
  return best;
}

void Report(const char* name, const waste::Tokenizer& tok, const std::string& text) {
  size_t n_ids = 0;
  const double enc = BestMbPerSecond(text.size(), [&] { n_ids = tok.Encode(text, false).size(); });
  const double markup = BestMbPerSecond(text.size(), [&] { tok.Encode(text, true); });
  const std::vector<int> ids = tok.Encode(text, false);
  const double dec = BestMbPerSecond(text.size(), [&] {
    if (tok.Decode(ids).size() != text.size()) std::fprintf(stderr, "round trip failed\n");
  });
  std::printf(
      "%-28s vocab %7d  %5.2f bytes/token  encode %6.1f MB/s  markup %6.1f MB/s  "
      "decode %7.1f MB/s\n",
      name, tok.vocab_size(), static_cast<double>(text.size()) / static_cast<double>(n_ids), enc,
      markup, dec);
}

}  // namespace

int main(int argc, char** argv) {
  std::string container = std::string(WASTE_FIXTURES_DIR) + "/warp-tiny-tok/container";
  std::string text_path = std::string(WASTE_SOURCE_DIR) + "/tests/data/tokenizer_corpus.txt";
  bool own_text = false;
  size_t mb = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--container")) {
      container = argv[i + 1];
    } else if (!std::strcmp(argv[i], "--text")) {
      text_path = argv[i + 1];
      own_text = true;
    } else if (!std::strcmp(argv[i], "--mb")) {
      mb = static_cast<size_t>(std::atol(argv[i + 1]));
    } else {
      std::fprintf(stderr, "usage: %s [--container DIR] [--text FILE] [--mb N]\n", argv[0]);
      return 2;
    }
  }
  const std::string raw = ReadFile(text_path);
  if (raw.empty()) {
    std::fprintf(stderr, "%s: empty or unreadable\n", text_path.c_str());
    return 1;
  }
  const std::string text = own_text ? raw : MixedText(raw, mb << 20);
  waste::Result<const waste::PreTokenizer*> pre = waste::PreTokenizer::Get();
  if (!pre) {
    std::fprintf(stderr, "%s\n", pre.error().ToString().c_str());
    return 1;
  }
  size_t pieces = 0;
  const double split = BestMbPerSecond(text.size(), [&] {
    pieces = 0;
    (*pre)->Split(text, [&](std::string_view) { ++pieces; });
  });
  std::printf("text %.1f MB, %zu pre-tokens; PCRE2 %s\n", static_cast<double>(text.size()) / 1e6,
              pieces, (*pre)->jit() ? "JIT" : "interpreter");
  std::printf("%-28s pre-tokenize only %6.1f MB/s\n", "", split);

  waste::Result<waste::Tokenizer> tok = waste::Tokenizer::Load(container);
  if (!tok) {
    std::fprintf(stderr, "%s\n", tok.error().ToString().c_str());
    return 1;
  }
  Report("container tokenizer", *tok, text);
  std::vector<waste::RankedToken> vocab = SyntheticVocab(text);
  std::vector<waste::SpecialToken> specials = tok->specials();
  for (size_t i = 0; i < specials.size(); ++i) specials[i].id = static_cast<int>(vocab.size() + i);
  waste::Result<waste::Tokenizer> synthetic =
      waste::Tokenizer::FromParts(std::move(vocab), std::move(specials));
  if (!synthetic) {
    std::fprintf(stderr, "%s\n", synthetic.error().ToString().c_str());
    return 1;
  }
  Report("synthetic vocabulary", *synthetic, text);
  return 0;
}
