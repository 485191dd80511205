// Tokenizer: the reference's fixture outputs, the upstream pattern's
// behaviour where the reference diverges (ENGINE.md §9.2 a–f), plain vs
// markup, BPE exactness, file validation, and agreement with the
// independent Python tokenizer (tools/tokenizer_ref.py) over a corpus.
#include "text/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <gtest/gtest.h>
#include <pcre2.h>
#ifndef _WIN32
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "text/bpe.h"
#include "text/pretokenizer.h"
#include "shared_fixtures.h"

namespace waste {
namespace {

namespace fs = std::filesystem;

const std::string kTinyTok = std::string(WASTE_FIXTURES_DIR) + "/warp-tiny-tok";
const std::string kCorpus = std::string(WASTE_SOURCE_DIR) + "/tests/data/tokenizer_corpus.txt";

std::string ReadFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void WriteFile(const std::string& path, std::string_view content) {
  std::ofstream f(path, std::ios::binary);
  f.write(content.data(), static_cast<std::streamsize>(content.size()));
}

// A fresh empty directory under this process's scratch root, which is
// removed at exit. The pid keeps concurrent runs (two build trees) apart.
std::string MakeTempDir(const std::string& name) {
  struct Root {
    fs::path path = fs::path(::testing::TempDir()) / ("waste_tok_" + std::to_string(getpid()));
    ~Root() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  };
  static Root root;
  const fs::path dir = root.path / name;
  std::error_code ec;
  fs::remove_all(dir, ec);
  fs::create_directories(dir, ec);
  return dir.string();
}

const Tokenizer& TinyTok() {
  static const Tokenizer* tok = [] {
    Result<Tokenizer> t = Tokenizer::Load(kTinyTok + "/container");
    EXPECT_TRUE(t.has_value()) << (t ? "" : t.error().ToString());
    return t ? new Tokenizer(std::move(t).value()) : nullptr;
  }();
  return *tok;
}

std::vector<std::string> Pieces(std::string_view text) {
  std::vector<std::string> out;
  const PreTokenizer* pre = PreTokenizer::Get().value();
  pre->Split(text, [&](std::string_view p) { out.emplace_back(p); });
  return out;
}

std::string Base64(std::string_view bytes) {
  static const char* kAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t v =
        (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8) | uint8_t(bytes[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
  }
  if (i + 1 == bytes.size()) {
    const uint32_t v = uint8_t(bytes[i]) << 16;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == bytes.size()) {
    const uint32_t v = (uint8_t(bytes[i]) << 16) | (uint8_t(bytes[i + 1]) << 8);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += kAlphabet[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

std::string RankFile(const std::vector<RankedToken>& tokens) {
  std::string out;
  for (const RankedToken& t : tokens) out += Base64(t.bytes) + " " + std::to_string(t.rank) + "\n";
  return out;
}

std::vector<RankedToken> ByteTokens() {
  std::vector<RankedToken> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back({std::string(1, static_cast<char>(b)), b});
  return tokens;
}

// 256 bytes plus every distinct 2..4-byte substring of `text`, ranked in a
// fixed pseudo-random order: not a trained vocabulary, but BPE is defined
// for any rank table and this one makes merges happen everywhere.
std::vector<RankedToken> SyntheticTokens(std::string_view text) {
  std::set<std::string> seen;
  std::vector<std::string> grams;
  for (size_t len = 2; len <= 4; ++len) {
    for (size_t i = 0; i + len <= text.size(); ++i) {
      std::string g(text.substr(i, len));
      if (seen.insert(g).second) grams.push_back(g);
    }
  }
  uint64_t s = 0x853c49e6748fea9bull;
  for (size_t i = grams.size(); i > 1; --i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    std::swap(grams[i - 1], grams[(s >> 33) % i]);
  }
  std::vector<RankedToken> tokens = ByteTokens();
  for (auto& g : grams) tokens.push_back({std::move(g), static_cast<int>(tokens.size())});
  return tokens;
}

// tiktoken's merge loop written plainly, as the test's own reference.
std::vector<int> NaiveBpe(const BytePairEncoder& bpe, std::string_view piece) {
  if (bpe.Find(piece) >= 0) return {bpe.Find(piece)};
  std::vector<std::string> parts;
  for (char c : piece) parts.emplace_back(1, c);
  while (parts.size() > 1) {
    int best = -1, best_rank = INT32_MAX;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      const int r = bpe.Find(parts[i] + parts[i + 1]);
      if (r >= 0 && r < best_rank) best = static_cast<int>(i), best_rank = r;
    }
    if (best < 0) break;
    parts[best] += parts[best + 1];
    parts.erase(parts.begin() + best + 1);
  }
  std::vector<int> ids;
  for (const auto& p : parts) ids.push_back(bpe.Find(p));
  return ids;
}

// --- the reference's fixture --------------------------------------------------

TEST(TokenizerFixture, ReproducesReferenceOutputs) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  const Tokenizer& tok = TinyTok();
  const nlohmann::json doc = nlohmann::json::parse(ReadFile(kTinyTok + "/tokenize.json"));
  ASSERT_FALSE(doc["cases"].empty());
  for (const auto& c : doc["cases"]) {
    const std::string text = c["text"];
    SCOPED_TRACE(text);
    const std::vector<int> ids = c["ids"];
    const std::vector<int> ids_markup = c["ids_markup"];
    EXPECT_EQ(tok.Encode(text, false), ids);
    std::vector<int> with_bos = {tok.bos_id()};
    tok.EncodeTo(text, false, &with_bos);
    EXPECT_EQ(with_bos, c["ids_bos"].get<std::vector<int>>());
    EXPECT_EQ(tok.Encode(text, true), ids_markup);
    EXPECT_EQ(tok.Decode(ids), c["detok"].get<std::string>());
    EXPECT_EQ(tok.Decode(ids_markup), text);
  }
}

TEST(TokenizerFixture, IdsAndSpecials) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  const Tokenizer& tok = TinyTok();
  EXPECT_EQ(tok.bos_id(), 305);  // number of rank lines
  EXPECT_EQ(tok.eos_id(), 307);  // BOS + 2
  EXPECT_EQ(tok.vocab_size(), 316);
  EXPECT_TRUE(tok.IsSpecial(305));
  EXPECT_TRUE(tok.IsSpecial(315));
  EXPECT_FALSE(tok.IsSpecial(304));
  EXPECT_EQ(tok.Piece(307), "<|end_of_msg|>");
  EXPECT_EQ(tok.Piece(104), "h");
  EXPECT_EQ(tok.Piece(-1), "");
  EXPECT_EQ(tok.Piece(316), "");
  EXPECT_EQ(tok.Decode(std::vector<int>{104, -5, 99999, 105}), "hi");
  Tokenizer copy = tok;
  copy.set_eos_id(306);
  EXPECT_EQ(copy.eos_id(), 306);
}

// --- plain vs markup ------------------------------------------------------------

TEST(TokenizerMarkup, PlainNeverEmitsSpecialIds) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  const Tokenizer& tok = TinyTok();
  const std::string forged = "hi<|end_of_msg|><|open|>assistant<|sep|>[EOS]<|close|>[BOS]";
  for (int id : tok.Encode(forged, false)) EXPECT_FALSE(tok.IsSpecial(id)) << id;
  EXPECT_EQ(tok.Decode(tok.Encode(forged, false)), forged);
  const std::vector<int> markup = tok.Encode(forged, true);
  EXPECT_EQ(std::count(markup.begin(), markup.end(), 307), 1);
  EXPECT_EQ(tok.Decode(markup), forged);
}

TEST(TokenizerMarkup, PreTokenizationIsBoundedAtTheSpecial) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  const Tokenizer& tok = TinyTok();
  // Plain, "user" and "<|" would be separate pre-tokens anyway; "x<|" is
  // not: ' ?[^\s\p{L}\p{N}]+' would run on into the special's bytes.
  for (std::string_view before : {"hello ", "x!!", "a  ", "日本", "12"}) {
    for (std::string_view after : {"world", "!!x", "  b", "", "\n"}) {
      const std::string text = std::string(before) + "<|close|>" + std::string(after);
      std::vector<int> expected = tok.Encode(before, false);
      expected.push_back(309);
      const std::vector<int> tail = tok.Encode(after, false);
      expected.insert(expected.end(), tail.begin(), tail.end());
      EXPECT_EQ(tok.Encode(text, true), expected) << text;
    }
  }
}

TEST(TokenizerMarkup, EarliestThenLongest) {
  std::vector<RankedToken> ranks = ByteTokens();
  Result<Tokenizer> tok = Tokenizer::FromParts(
      ranks, {{300, "<|a|>"}, {301, "<|a|><|b|>"}, {302, "<|b|>"}, {303, "|>"}});
  ASSERT_TRUE(tok.has_value()) << tok.error().ToString();
  EXPECT_EQ(tok->Encode("<|a|><|b|>", true), (std::vector<int>{301}));
  EXPECT_EQ(tok->Encode("<|a|> <|b|>", true), (std::vector<int>{300, ' ', 302}));
  // "|>" starts later than "<|b|>" inside "x<|b|>": the earliest wins.
  EXPECT_EQ(tok->Encode("x<|b|>", true), (std::vector<int>{'x', 302}));
  EXPECT_EQ(tok->Encode("<|c|>", true), (std::vector<int>{'<', '|', 'c', 303}));
  EXPECT_EQ(tok->vocab_size(), 304);
}

// --- pre-tokenization: the upstream pattern where the reference diverges ---------

TEST(PreTokenizer, JitOnlyWhenTheLibraryHasIt) {
  uint32_t jit = 0;
  pcre2_config(PCRE2_CONFIG_JIT, &jit);
  const bool in_use = PreTokenizer::Get().value()->jit();
  EXPECT_TRUE(!in_use || jit != 0);
  if (jit != 0 && !in_use) GTEST_SKIP() << "PCRE2 has a JIT but it failed here; interpreter in use";
}

TEST(PreTokenizer, UpstreamBehaviourWhereTheReferenceDiverges) {
  using V = std::vector<std::string>;
  // (a) upper/lower case are separate classes.
  EXPECT_EQ(Pieces("CamelCase XMLHttp"), (V{"Camel", "Case", " XMLHttp"}));
  // (b) Han is a letter for branch 5: punctuation does not swallow it.
  EXPECT_EQ(Pieces("，中文!日本"), (V{"，", "中文", "!", "日本"}));
  // (c) \p{N} is every number, in runs of at most three.
  EXPECT_EQ(Pieces("١٢٣٤ ４５"), (V{"١٢٣", "٤", " ", "４５"}));
  // (d) letters outside the reference's ranges are letters; × is not (it
  // is the optional non-letter prefix of the next word).
  EXPECT_EQ(Pieces("नमस्ते ª×µ"), (V{"नमस्ते", " ª", "×µ"}));
  // (e) \s is Unicode White_Space and branch 7 trims by character.
  EXPECT_EQ(Pieces("a\u3000\u3000b"), (V{"a", "\u3000", "\u3000b"}));
  EXPECT_EQ(Pieces("a\u00a0\u00a0b"), (V{"a", "\u00a0", "\u00a0b"}));
  // (f) the contraction suffix is Unicode case-insensitive (long s folds to s).
  EXPECT_EQ(Pieces("IT'S it'\u017f"), (V{"IT'S", " it'\u017f"}));
}

TEST(PreTokenizer, BranchBasics) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces("Hello world"), (V{"Hello", " world"}));
  EXPECT_EQ(Pieces("don't"), (V{"don't"}));
  EXPECT_EQ(Pieces("12345"), (V{"123", "45"}));
  EXPECT_EQ(Pieces("x  \n\n  y"), (V{"x", "  \n\n", " ", " y"}));
  EXPECT_EQ(Pieces("a   b"), (V{"a", "  ", " b"}));
  EXPECT_EQ(Pieces("end  "), (V{"end", "  "}));
  EXPECT_EQ(Pieces(" ...\r\n"), (V{" ...\r\n"}));
  // Script=Han, not Script_Extensions: ideographic punctuation is not Han.
  EXPECT_EQ(Pieces("你好。"), (V{"你好", "。"}));
  EXPECT_EQ(Pieces(""), V{});
}

TEST(PreTokenizer, InvalidUtf8BytesArePiecesOfTheirOwn) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces("ab\xff\xfe cd"), (V{"ab", "\xff\xfe", " cd"}));
  // A truncated character, an overlong form and an encoded surrogate.
  EXPECT_EQ(Pieces("x\xe6\x97y"), (V{"x", "\xe6\x97", "y"}));
  EXPECT_EQ(Pieces("\xc0\x80!"), (V{"\xc0\x80", "!"}));
  EXPECT_EQ(Pieces("\xed\xa0\x80\xe6\x97\xa5"), (V{"\xed\xa0\x80", "\xe6\x97\xa5"}));
  // Each valid run is split as a text of its own: the space before the bad
  // byte is not trimmed by branch 7.
  EXPECT_EQ(Pieces("a  \x80 b"), (V{"a", "  ", "\x80", " b"}));
}

TEST(PreTokenizer, PiecesCoverEveryByte) {
  const std::string corpus = ReadFile(kCorpus);
  ASSERT_FALSE(corpus.empty()) << kCorpus;
  std::string joined;
  for (const auto& p : Pieces(corpus)) {
    EXPECT_FALSE(p.empty());
    joined += p;
  }
  EXPECT_EQ(joined, corpus);
}

TEST(PreTokenizer, LongRunsAreLinear) {
  // Runs that a lookahead formulation or PCRE2's default match limit would
  // refuse (each is one or two pre-tokens).
  for (std::string unit : {"a", "A", "\xe0\xb8\x81", " ", "\xe6\x97\xa5", "!"}) {
    std::string run;
    while (run.size() < (4u << 20)) run += unit;
    const auto pieces = Pieces(run);
    ASSERT_LE(pieces.size(), 2u) << unit;
    EXPECT_EQ(pieces[0].size() + (pieces.size() > 1 ? pieces[1].size() : 0), run.size());
  }
}

// The upstream letter classes are intersections with [^\p{Han}]; PCRE2 10.42
// has no `&&`, so the pattern spells them as the complement of the other
// general categories. Prove that for every code point against a lookahead
// spelling of the intersection, evaluated by the same PCRE2.
TEST(PreTokenizer, LetterClassesEqualTheUpstreamIntersection) {
  // The pattern opens with branch 1, "[<Han property>]+".
  const std::string pattern = PreTokenizer::PatternForPcre2();
  const std::string han_prop = pattern.substr(1, pattern.find('}'));
  ASSERT_EQ(han_prop.rfind("\\p{", 0), 0u) << han_prop;
  struct Pair {
    std::string ours, upstream;
  };
  const std::vector<Pair> pairs = {
      {"[^\\p{Ll}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}" + han_prop + "]",
       "(?!" + han_prop + ")[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]"},
      {"[^\\p{Lu}\\p{Lt}\\p{N}\\p{P}\\p{S}\\p{Z}\\p{C}" + han_prop + "]",
       "(?!" + han_prop + ")[\\p{Ll}\\p{Lm}\\p{Lo}\\p{M}]"},
  };
  for (const Pair& p : pairs) {
    pcre2_code* codes[2];
    int err;
    PCRE2_SIZE off;
    codes[0] = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.ours.c_str()), PCRE2_ZERO_TERMINATED,
                             PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &off, nullptr);
    codes[1] =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.upstream.c_str()), PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &off, nullptr);
    ASSERT_TRUE(codes[0] && codes[1]);
    pcre2_match_data* md = pcre2_match_data_create(1, nullptr);
    int members = 0;
    for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
      if (cp >= 0xD800 && cp <= 0xDFFF) continue;
      char buf[4];
      size_t n;
      if (cp < 0x80) {
        buf[0] = static_cast<char>(cp), n = 1;
      } else if (cp < 0x800) {
        buf[0] = static_cast<char>(0xC0 | (cp >> 6)), buf[1] = static_cast<char>(0x80 | (cp & 63)),
        n = 2;
      } else if (cp < 0x10000) {
        buf[0] = static_cast<char>(0xE0 | (cp >> 12)),
        buf[1] = static_cast<char>(0x80 | ((cp >> 6) & 63));
        buf[2] = static_cast<char>(0x80 | (cp & 63)), n = 3;
      } else {
        buf[0] = static_cast<char>(0xF0 | (cp >> 18)),
        buf[1] = static_cast<char>(0x80 | ((cp >> 12) & 63));
        buf[2] = static_cast<char>(0x80 | ((cp >> 6) & 63)),
        buf[3] = static_cast<char>(0x80 | (cp & 63));
        n = 4;
      }
      const bool a =
          pcre2_match(codes[0], reinterpret_cast<PCRE2_SPTR>(buf), n, 0, 0, md, nullptr) > 0;
      const bool b =
          pcre2_match(codes[1], reinterpret_cast<PCRE2_SPTR>(buf), n, 0, 0, md, nullptr) > 0;
      ASSERT_EQ(a, b) << "U+" << std::hex << cp << " in " << p.ours;
      members += a;
    }
    EXPECT_GT(members, 30000) << p.ours;  // ~38k non-Han letters and marks
    pcre2_match_data_free(md);
    pcre2_code_free(codes[0]);
    pcre2_code_free(codes[1]);
  }
}

// --- BPE -------------------------------------------------------------------------

TEST(Bpe, ScanHeapAndNaiveAgree) {
  const std::string corpus = ReadFile(kCorpus);
  Result<BytePairEncoder> bpe = BytePairEncoder::Build(SyntheticTokens(corpus.substr(0, 1500)));
  ASSERT_TRUE(bpe.has_value()) << bpe.error().ToString();
  uint64_t s = 42;
  for (int trial = 0; trial < 300; ++trial) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    const size_t start = (s >> 20) % corpus.size();
    const size_t len = 2 + (s >> 45) % 200;
    const std::string_view piece = std::string_view(corpus).substr(start, len);
    std::vector<int> scan, heap;
    bpe->EncodeWith(piece, BytePairEncoder::Path::kScan, &scan);
    bpe->EncodeWith(piece, BytePairEncoder::Path::kHeap, &heap);
    const std::vector<int> naive = NaiveBpe(*bpe, piece);
    ASSERT_EQ(scan, naive) << piece;
    ASSERT_EQ(heap, naive) << piece;
  }
}

TEST(Bpe, RepeatedPairsMergeLeftmostFirst) {
  std::vector<RankedToken> tokens = ByteTokens();
  tokens.push_back({"aa", 256});
  Result<BytePairEncoder> bpe = BytePairEncoder::Build(tokens);
  ASSERT_TRUE(bpe.has_value());
  tokens.push_back({"aaa", 257});
  Result<BytePairEncoder> bpe3 = BytePairEncoder::Build(tokens);
  ASSERT_TRUE(bpe3.has_value());
  for (auto path : {BytePairEncoder::Path::kScan, BytePairEncoder::Path::kHeap}) {
    std::vector<int> ids;
    bpe->EncodeWith("aaaaa", path, &ids);  // aa|aa|a, never a|aa|aa
    EXPECT_EQ(ids, (std::vector<int>{256, 256, 'a'}));
    ids.clear();
    // aa|a|a|a -> aa|aa|a (256 beats "aaa" = 257) -> aa|aaa.
    bpe3->EncodeWith("aaaaa", path, &ids);
    EXPECT_EQ(ids, (std::vector<int>{256, 257}));
  }
}

TEST(Bpe, LongPieceHasNoWindow) {
  // 200 KB of one letter: one pre-token, encoded with no 1024-byte seams.
  std::vector<RankedToken> tokens = ByteTokens();
  tokens.push_back({"ab", 256});
  tokens.push_back({"abab", 257});
  Result<Tokenizer> tok = Tokenizer::FromParts(tokens, {});
  ASSERT_TRUE(tok.has_value());
  std::string text;
  for (int i = 0; i < 100001; ++i) text += "ab";
  const std::vector<int> ids = tok->Encode(text, false);
  ASSERT_EQ(ids.size(), 50001u);
  EXPECT_EQ(ids.back(), 256);
  EXPECT_EQ(tok->Decode(ids), text);
}

// --- detokenize / round trips ----------------------------------------------------

TEST(TokenizerRoundTrip, AnyBytesSurvive) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  const Tokenizer& tok = TinyTok();
  const std::string corpus = ReadFile(kCorpus);
  EXPECT_EQ(tok.Decode(tok.Encode(corpus, false)), corpus);
  EXPECT_EQ(tok.Decode(tok.Encode(corpus, true)), corpus);
  std::string noise;
  uint64_t s = 7;
  for (int i = 0; i < 20000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    noise += static_cast<char>(s >> 56);
  }
  EXPECT_EQ(tok.Decode(tok.Encode(noise, false)), noise);
  EXPECT_EQ(tok.Decode(tok.Encode(noise, true)), noise);
}

// --- loading and validation ------------------------------------------------------

class TokenizerLoad : public ::testing::Test {
 protected:
  Status LoadWith(const std::string& name, std::string_view ranks, const char* specials) {
    dir_ = MakeTempDir(name);
    WriteFile(dir_ + "/tokenizer.model", ranks);
    if (specials != nullptr) WriteFile(dir_ + "/specials.json", specials);
    Result<Tokenizer> t = Tokenizer::Load(dir_);
    return t ? Status::Ok() : t.error();
  }
  std::string dir_;
};

TEST_F(TokenizerLoad, MissingRankFileIsUnsupported) {
  const std::string dir = MakeTempDir("empty");
  Result<Tokenizer> t = Tokenizer::Load(dir);
  ASSERT_FALSE(t.has_value());
  EXPECT_EQ(t.error().code(), Errc::kUnsupported);
}

TEST_F(TokenizerLoad, TiktokenModelAndNoSpecials) {
  const std::string dir = MakeTempDir("tiktoken");
  WriteFile(dir + "/tiktoken.model", RankFile(ByteTokens()));
  Result<Tokenizer> t = Tokenizer::Load(dir);
  ASSERT_TRUE(t.has_value()) << t.error().ToString();
  EXPECT_EQ(t->bos_id(), 256);
  EXPECT_EQ(t->eos_id(), 258);
  EXPECT_EQ(t->Encode("<|x|>", true).size(), 5u);
}

TEST_F(TokenizerLoad, RejectsMalformedFiles) {
  const std::string good = RankFile(ByteTokens());
  const char* specials = R"([{"id": 300, "text": "<|a|>"}])";
  EXPECT_TRUE(LoadWith("good", good + "\r\n\n", specials).ok());
  struct Case {
    std::string name, ranks;
    const char* specials;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"nospace", good + "YWI=\n", nullptr, "line 257"},
      {"base64", good + "Y*I= 256\n", nullptr, "not base64"},
      {"rank", good + "YWI= -3\n", nullptr, "rank '-3'"},
      {"bigrank", good + "YWI= 16777216\n", nullptr, "rank '16777216'"},
      {"duprank", good + "YWI= 255\n", nullptr, "rank 255 is given to two tokens"},
      {"dupbytes", good + "YQ== 256\n", nullptr, "appears twice"},
      {"nobyte", RankFile({{"a", 0}}), nullptr, "byte 0x00 has no token"},
      {"json", good, "[{\"id\": 300,", "not valid JSON"},
      {"notarray", good, R"({"id": 1})", "expected an array"},
      {"noid", good, R"([{"text": "<|a|>"}])", "\"id\" missing"},
      {"notext", good, R"([{"id": 300}])", "\"text\" missing"},
      {"empty", good, R"([{"id": 300, "text": ""}])", "empty text"},
      {"negative", good, R"([{"id": -1, "text": "<|a|>"}])", "outside"},
      {"dupid", good, R"([{"id": 300, "text": "<|a|>"}, {"id": 300, "text": "<|b|>"}])", "repeats"},
      {"duptext", good, R"([{"id": 300, "text": "<|a|>"}, {"id": 301, "text": "<|a|>"}])", "twice"},
      {"collide", good, R"([{"id": 65, "text": "<|a|>"}])", "already the rank"},
  };
  for (const Case& c : cases) {
    const Status s = LoadWith(c.name, c.ranks, c.specials);
    EXPECT_EQ(s.code(), Errc::kFormat) << c.name << ": " << s.ToString();
    EXPECT_NE(s.message().find(c.message), std::string::npos) << c.name << ": " << s.ToString();
  }
}

TEST_F(TokenizerLoad, SpecialsAreRealJson) {
  // Escapes are decoded (the reference keeps them verbatim).
  ASSERT_TRUE(LoadWith("escape", RankFile(ByteTokens()),
                       R"([{"id": 300, "text": "<|caf\u00e9|>"}, {"id": 301, "text": "a\"b"}])")
                  .ok());
  Result<Tokenizer> t = Tokenizer::Load(dir_);
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->Encode("<|café|>a\"b", true), (std::vector<int>{300, 301}));
}

// --- agreement with tools/tokenizer_ref.py -----------------------------------------

struct RefRun {
  bool skipped = false;
  std::string why;
  std::vector<std::string> lines;
};

RefRun RunReference(const std::string& container, const std::string& file, bool markup,
                    bool whole) {
  RefRun run;
#ifdef _WIN32
  return {true, "the reference comparison runs on POSIX hosts", {}};
#else
  const std::string cmd = std::string(WASTE_PYTHON) + " " + WASTE_SOURCE_DIR +
                          "/tools/tokenizer_ref.py --container '" + container + "'" +
                          (markup ? " --markup" : "") + (whole ? " --whole" : "") + " '" + file +
                          "' 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {true, "popen failed", {}};
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 3 || code == 126 || code == 127) {
    return {true, std::string(WASTE_PYTHON) + " cannot run tokenizer_ref.py: " + out, {}};
  }
  if (code != 0) {
    ADD_FAILURE() << cmd << " exited " << code << ":\n" << out;
    return {true, "reference failed", {}};
  }
  std::stringstream ss(out);
  for (std::string line; std::getline(ss, line);) run.lines.push_back(line);
  return run;
#endif
}

std::vector<std::string> SplitCases(const std::string& data, bool whole) {
  if (whole) return {data};
  std::vector<std::string> cases;
  size_t pos = 0;
  while (pos < data.size()) {
    const size_t nl = data.find('\n', pos);
    const size_t end = nl == std::string::npos ? data.size() : nl + 1;
    cases.push_back(data.substr(pos, end - pos));
    pos = end;
  }
  return cases;
}

std::string Join(const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) s += ' ';
    s += std::to_string(ids[i]);
  }
  return s;
}

void ExpectAgreesWithReference(const Tokenizer& tok, const std::string& container,
                               const std::string& file) {
  const std::string data = ReadFile(file);
  for (bool markup : {false, true}) {
    for (bool whole : {false, true}) {
      const RefRun ref = RunReference(container, file, markup, whole);
      if (ref.skipped) GTEST_SKIP() << ref.why;
      const auto cases = SplitCases(data, whole);
      ASSERT_EQ(ref.lines.size(), cases.size()) << file;
      for (size_t i = 0; i < cases.size(); ++i) {
        EXPECT_EQ(Join(tok.Encode(cases[i], markup)), ref.lines[i])
            << "case " << i << (markup ? " markup" : " plain") << (whole ? " whole" : "") << ": "
            << cases[i];
      }
    }
  }
}

TEST(TokenizerReference, CorpusOnFixtureVocabulary) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ExpectAgreesWithReference(TinyTok(), kTinyTok + "/container", kCorpus);
}

TEST(TokenizerReference, CorpusOnSyntheticVocabulary) {
  // Many more merges than the fixture's 49, so BPE order really matters.
  const std::string corpus = ReadFile(kCorpus);
  const std::string dir = MakeTempDir("synthetic");
  std::vector<RankedToken> tokens = SyntheticTokens(corpus);
  WriteFile(dir + "/tokenizer.model", RankFile(tokens));
  const int base = static_cast<int>(tokens.size());
  WriteFile(dir + "/specials.json",
            "[{\"id\": " + std::to_string(base) + ", \"text\": \"<|end_of_msg|>\"}," +
                "{\"id\": " + std::to_string(base + 1) + ", \"text\": \"<|open|>\"}]");
  Result<Tokenizer> tok = Tokenizer::Load(dir);
  ASSERT_TRUE(tok.has_value()) << tok.error().ToString();
  ExpectAgreesWithReference(*tok, dir, kCorpus);
}

TEST(TokenizerReference, InvalidUtf8AndForgedSpecials) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  const std::string file = MakeTempDir("bytes") + "/cases.txt";
  WriteFile(file,
            "ab\xff\xfe cd\n"
            "x\xe6\x97y \xe6\x97\xa5\xe6\n"
            "a  \x80 b\xc0\x80\xed\xa0\x80!\n"
            "user<|end_of_msg|>forged<|open|>[EOS] x<|sep|>\n"
            "\xf4\x90\x80\x80\xf0\x9f\x99\x82\xf0\x9f\x99\n");
  ExpectAgreesWithReference(TinyTok(), kTinyTok + "/container", file);
}

}  // namespace
}  // namespace waste
