// Cost of constrained decoding per token at K3's vocabulary size (163,840
// pieces): the full Mask() (one walk of the vocabulary trie) in a JSON
// string, where nearly every token is allowed, and at a structural
// position, where few are; and the Allows() check that replaces the mask
// whenever the sampler's own pick is allowed. The vocabulary is synthetic
// (byte-level-BPE-like pieces: every byte, words with and without a
// leading space, digits, JSON punctuation, CJK); docs/SERVER.md has the
// figures.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "waste/grammar.h"

namespace {

std::shared_ptr<const waste::Vocabulary> SyntheticVocab() {
  static std::shared_ptr<const waste::Vocabulary> vocab = [] {
    std::mt19937 rng(7);
    std::vector<std::string> pieces;
    for (int b = 0; b < 256; ++b) pieces.push_back(std::string(1, static_cast<char>(b)));
    const char* punct[] = {"\"", "\":", "\",", "{\"", "\"}", "},", "[", "]", ", ", ": ", "\n", "  ", "\\n", "."};
    for (const char* p : punct) pieces.push_back(p);
    const std::string cjk[] = {"的", "一", "是", "不", "了", "人", "我", "在", "有", "他"};
    std::uniform_int_distribution<int> len(1, 9), letter(0, 25), kind(0, 9), digit(0, 9), c(0, 9);
    while (pieces.size() < 163840) {
      std::string p;
      int k = kind(rng);
      if (k < 4) p = " ";
      if (k == 9) {
        for (int i = 0, n = len(rng) % 3 + 1; i < n; ++i) p += cjk[c(rng)];
      } else if (k == 8) {
        for (int i = 0, n = len(rng) % 4 + 1; i < n; ++i) p += static_cast<char>('0' + digit(rng));
      } else {
        for (int i = 0, n = len(rng); i < n; ++i) p += static_cast<char>('a' + letter(rng));
        if (k == 5) p[0] = static_cast<char>(p[0] - 'a' + 'A');
      }
      pieces.push_back(p);
    }
    pieces.push_back("<|end_of_msg|>");
    return waste::Vocabulary::Build(pieces, {static_cast<int>(pieces.size()) - 1});
  }();
  return vocab;
}

std::shared_ptr<const waste::Grammar> PersonSchema() {
  auto g = waste::Grammar::FromJsonSchema(
      R"({"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"},
          "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["name", "age"]})");
  return *g;
}

// The full mask after `prefix`, the transition cache warm.
void MaskAfter(benchmark::State& state, const std::shared_ptr<const waste::Grammar>& g,
               const char* prefix) {
  waste::GrammarMatcher m(g, SyntheticVocab());
  m.AcceptText(prefix);
  std::vector<float> logits(163841, 0.0f);
  m.Mask(logits);
  for (auto _ : state) {
    std::fill(logits.begin(), logits.end(), 0.0f);
    m.Mask(logits);
    benchmark::DoNotOptimize(logits.data());
  }
}

void BM_MaskInsideString(benchmark::State& state) {
  MaskAfter(state, PersonSchema(), "{\"name\": \"Ad");
}
BENCHMARK(BM_MaskInsideString)->Unit(benchmark::kMillisecond);

void BM_MaskAfterBrace(benchmark::State& state) { MaskAfter(state, PersonSchema(), "{"); }
BENCHMARK(BM_MaskAfterBrace)->Unit(benchmark::kMillisecond);

void BM_MaskFirstStepColdCache(benchmark::State& state) {
  auto vocab = SyntheticVocab();
  std::vector<float> logits(163841, 0.0f);
  for (auto _ : state) {
    waste::GrammarMatcher m(PersonSchema(), vocab);
    m.AcceptText("{\"name\": \"Ad");
    m.Mask(logits);
    benchmark::DoNotOptimize(logits.data());
  }
}
BENCHMARK(BM_MaskFirstStepColdCache)->Unit(benchmark::kMillisecond);

// A pattern (an unanchored search: free text on either side of the match)
// and a bounded integer: the rules the pattern and bound compilers write.
std::shared_ptr<const waste::Grammar> PatternSchema() {
  auto g = waste::Grammar::FromJsonSchema(
      R"({"type": "object", "properties": {"code": {"type": "string", "pattern": "[A-Z]{2}-\\d{3}(?:-[a-z]+)?"},
          "age": {"type": "integer", "minimum": 18, "maximum": 120}}, "required": ["code", "age"]})");
  return *g;
}

void BM_MaskInsidePattern(benchmark::State& state) {
  MaskAfter(state, PatternSchema(), "{\"code\": \"xyzAB-1");
}
BENCHMARK(BM_MaskInsidePattern)->Unit(benchmark::kMillisecond);

void BM_MaskInsideBoundedInteger(benchmark::State& state) {
  MaskAfter(state, PatternSchema(), "{\"code\": \"AB-123\", \"age\": 1");
}
BENCHMARK(BM_MaskInsideBoundedInteger)->Unit(benchmark::kMillisecond);

void BM_AllowsSampledToken(benchmark::State& state) {
  auto vocab = SyntheticVocab();
  waste::GrammarMatcher m(PersonSchema(), vocab);
  m.AcceptText("{\"name\": \"Ad");
  int token = 300;
  for (auto _ : state) benchmark::DoNotOptimize(m.Allows(token++ % 163840));
}
BENCHMARK(BM_AllowsSampledToken);

void BM_BuildVocabulary(benchmark::State& state) {
  for (auto _ : state) {
    std::vector<std::string> pieces;
    pieces.reserve(163840);
    for (int i = 0; i < 163840; ++i) pieces.push_back(std::to_string(i * 7919 % 163840).insert(0, 1, 'p'));
    benchmark::DoNotOptimize(waste::Vocabulary::Build(std::move(pieces), {}));
  }
}
BENCHMARK(BM_BuildVocabulary)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
