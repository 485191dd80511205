// A Hugging Face tokenizer.json in DeepSeek-V3's shape (tests/data, trained
// by tests/data/make_deepseek_tokenizer.py) converted into tokenizer.model,
// specials.json and pretokenizer.json, then loaded by the engine's
// Tokenizer: its ids must equal those of tools/hf_tokenizer_ref.py, an
// independent Python implementation of Hugging Face's documented BPE and
// Split semantics that reads the tokenizer.json itself. Also: Split
// behaviours by hand, and refusals of broken tokenizer.json and sidecars.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/hf_tokenizer.h"
#include "temp_dir.h"
#include "text/pretokenizer.h"
#include "text/tokenizer.h"

namespace waste {
namespace {

using nlohmann::json;
using waste::testing::TempDir;

const std::string kData = std::string(WASTE_SOURCE_DIR) + "/tests/data/deepseek_tokenizer.json";

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// Texts that exercise every Split rule: ASCII words, digit groups, CJK and
// kana runs, emoji (with a skin-tone modifier), mixed whitespace, code,
// combining marks, scripts the tiny vocabulary never saw, U+0085.
const std::vector<std::string> kCases = {
    "Hello world",
    "The tokenizer splits the text into pieces.",
    "1234567",
    "3.14159 and 2024!",
    "x=12345678901;y=-0.5e10",
    "深度求索的模型使用字节级的分词器。",
    "日本語のテキストもカタカナとひらがなで書かれています",
    "mixed中文and English日本語カタカナ123",
    "😀 🚀 👍🏽 done",
    "  a\t\tb\r\n\n  c   ",
    "\n\n\n",
    "   ",
    "def main(argv):\n    for i in range(10):\n        print(\"hi\", i)\n",
    "if (x != y && y >= 0) { return x->next; }",
    "café naïve e\xcc\x81 Ærøskøbing Straße",
    "Привет, мир! مرحبا",
    "x\xc2\x85y \xe3\x80\x80z",
    "'s 're don't I'M",
    "foo.bar_baz(x) #include <stdio.h> Hello,World ...and",
    "<｜User｜>hi<｜Assistant｜><think>ok</think>",
    "<｜begin▁of▁sentence｜>text<｜end▁of▁sentence｜>",
    "",
};

struct RefResult {
  bool skipped = false;
  std::string why;
  std::vector<std::vector<int>> ids;
};

RefResult RunReference(const std::string& tokenizer_json, const std::vector<std::string>& cases, bool plain) {
#ifdef _WIN32
  return {true, "runs on POSIX hosts", {}};
#else
  TempDir dir;
  Write(dir / "cases.json", json(cases).dump());
  const std::string cmd = std::string(WASTE_PYTHON) + " " + WASTE_SOURCE_DIR + "/tools/hf_tokenizer_ref.py '" +
                          tokenizer_json + "' '" + (dir / "cases.json") + "'" + (plain ? " --plain" : "") + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (p == nullptr) return {true, "popen failed", {}};
  std::string out;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  const int status = pclose(p);
  if (!WIFEXITED(status) || WEXITSTATUS(status) == 3 || WEXITSTATUS(status) == 127) {
    return {true, std::string(WASTE_PYTHON) + " or its regex module is missing: " + out, {}};
  }
  EXPECT_EQ(WEXITSTATUS(status), 0) << out;
  RefResult r;
  r.ids = json::parse(out).get<std::vector<std::vector<int>>>();
  return r;
#endif
}

// Converts `tokenizer_json` into a container directory.
Result<std::string> ConvertInto(const TempDir& dir, const std::string& tokenizer_json, int bos_id = 0) {
  WASTE_ASSIGN_OR_RETURN(convert::HfTokenizerFiles files,
                         convert::ConvertHfTokenizer(tokenizer_json, "tokenizer.json", bos_id));
  const std::string out = dir / "container";
  std::filesystem::create_directories(out);
  Write(out + "/tokenizer.model", files.rank_file);
  Write(out + "/pretokenizer.json", files.pretokenizer_json);
  if (!files.specials_json.empty()) Write(out + "/specials.json", files.specials_json);
  return out;
}

// `lossless`: no Split removes text, so decoding gives the text back.
void ExpectAgreement(const std::string& tokenizer_json_path, bool lossless) {
  TempDir dir;
  auto out = ConvertInto(dir, Slurp(tokenizer_json_path));
  ASSERT_TRUE(out) << out.error().message();
  auto tok = Tokenizer::Load(*out);
  ASSERT_TRUE(tok) << tok.error().message();
  for (bool plain : {false, true}) {
    RefResult ref = RunReference(tokenizer_json_path, kCases, plain);
    if (ref.skipped) GTEST_SKIP() << ref.why;
    ASSERT_EQ(ref.ids.size(), kCases.size());
    for (size_t i = 0; i < kCases.size(); ++i) {
      EXPECT_EQ(tok->Encode(kCases[i], /*markup=*/!plain), ref.ids[i])
          << (plain ? "plain" : "markup") << " case " << i << ": '" << kCases[i] << "'";
      // Decoding gives the text back (specials decode to their text).
      if (lossless) EXPECT_EQ(tok->Decode(tok->Encode(kCases[i], !plain)), kCases[i]) << "case " << i;
    }
  }
}

TEST(HfTokenizer, DeepSeekShapeMatchesTheReference) { ExpectAgreement(kData, true); }

TEST(HfTokenizer, ConvertedFilesHaveTheReleaseIds) {
  auto files = convert::ConvertHfTokenizer(Slurp(kData), "tokenizer.json", 0);
  ASSERT_TRUE(files) << files.error().message();
  const json doc = json::parse(Slurp(kData));
  // Every vocabulary entry but the three specials inside it is a rank.
  EXPECT_EQ(files->rank_tokens, static_cast<int>(doc["model"]["vocab"].size()) - 3);
  EXPECT_EQ(files->special_tokens, static_cast<int>(doc["added_tokens"].size()));
  EXPECT_EQ(files->merges, static_cast<int>(doc["model"]["merges"].size()));
  const json side = json::parse(files->pretokenizer_json);
  ASSERT_EQ(side["splits"].size(), 3u);  // ByteLevel with use_regex false adds none
  EXPECT_EQ(side["splits"][0]["pattern"], "\\p{N}{1,3}");
  EXPECT_EQ(side["bos_id"], 0);
  TempDir dir;
  auto out = ConvertInto(dir, Slurp(kData));
  ASSERT_TRUE(out);
  auto tok = Tokenizer::Load(*out);
  ASSERT_TRUE(tok) << tok.error().message();
  EXPECT_EQ(tok->bos_id(), 0);  // from bos_id, not the positional rule
  EXPECT_EQ(tok->vocab_size(), 669);
  // The ranks are the release's ids: "Ġ" (a space) keeps its vocabulary id.
  const int space_id = doc["model"]["vocab"]["\xc4\xa0"].get<int>();
  EXPECT_EQ(tok->Piece(space_id), " ");
}

// The same vocabulary under other Split behaviours, inverted matches, a
// literal String pattern and ByteLevel's own GPT-2 regex; plus a merge
// whose result already exists (Hugging Face's trainer writes those): dead
// in both algorithms, so accepted.
TEST(HfTokenizer, EveryBehaviourMatchesTheReference) {
  json doc = json::parse(Slurp(kData));
  doc["pre_tokenizer"] = json::parse(R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"String": "."}, "behavior": "MergedWithNext", "invert": false},
      {"type": "Split", "pattern": {"Regex": "\\p{N}"}, "behavior": "Contiguous", "invert": false},
      {"type": "Split", "pattern": {"Regex": "[aeiou]"}, "behavior": "MergedWithPrevious", "invert": true},
      {"type": "Split", "pattern": {"Regex": "\\s{3}"}, "behavior": "Removed", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}]})");
  json& vocab = doc["model"]["vocab"];
  json& merges = doc["model"]["merges"];
  int next = 669;
  for (const char* t : {"XZ", "QX", "QXZ"}) vocab[t] = next++;
  for (const char* m : {"X Z", "Q X", "Q XZ", "QX Z"}) merges.push_back(m);
  TempDir dir;
  Write(dir / "tokenizer.json", doc.dump());
  ExpectAgreement(dir / "tokenizer.json", /*lossless=*/false);
}

// "a-b--c" split on "-" by each behaviour, as Hugging Face's Split defines it.
TEST(HfTokenizer, SplitBehavioursByHand) {
  struct Case {
    SplitBehavior behavior;
    bool invert;
    std::vector<std::string> pieces;
  };
  const std::vector<Case> cases = {
      {SplitBehavior::kIsolated, false, {"a", "-", "b", "-", "-", "c"}},
      {SplitBehavior::kRemoved, false, {"a", "b", "c"}},
      {SplitBehavior::kMergedWithPrevious, false, {"a-", "b-", "-", "c"}},
      {SplitBehavior::kMergedWithNext, false, {"a", "-b", "-", "-c"}},
      {SplitBehavior::kContiguous, false, {"a", "-", "b", "--", "c"}},
      {SplitBehavior::kRemoved, true, {"-", "-", "-"}},
      // Inverted, the letters are the matches: each joins the span before it.
      {SplitBehavior::kMergedWithPrevious, true, {"a", "-b", "-", "-c"}},
  };
  for (const Case& c : cases) {
    auto pre = PreTokenizer::FromRules({SplitRule{"-", c.behavior, c.invert}}, "test");
    ASSERT_TRUE(pre) << pre.error().message();
    std::vector<std::string> got;
    (*pre)->Split("a-b--c", [&](std::string_view p) { got.emplace_back(p); });
    EXPECT_EQ(got, c.pieces) << static_cast<int>(c.behavior) << " invert " << c.invert;
  }
  // No rules: every valid run is one piece.
  auto none = PreTokenizer::FromRules({}, "test");
  ASSERT_TRUE(none);
  std::vector<std::string> whole;
  (*none)->Split("ab 12 cd", [&](std::string_view p) { whole.emplace_back(p); });
  EXPECT_EQ(whole, std::vector<std::string>{"ab 12 cd"});
  // Rules run in order, each over the previous one's pieces; \s is Unicode
  // White_Space (U+0085 included); invalid UTF-8 is a piece of its own.
  auto pre = PreTokenizer::FromRules({SplitRule{"\\p{N}{1,3}", SplitBehavior::kIsolated, false},
                                      SplitRule{"\\s+", SplitBehavior::kIsolated, false}},
                                     "test");
  ASSERT_TRUE(pre);
  std::vector<std::string> got;
  (*pre)->Split("ab1234\xc2\x85x\xff", [&](std::string_view p) { got.emplace_back(p); });
  EXPECT_EQ(got, (std::vector<std::string>{"ab", "123", "4", "\xc2\x85", "x", "\xff"}));
}

// Each mutation of the DeepSeek-shaped file is refused with the field named.
TEST(HfTokenizer, BrokenTokenizerJsonIsRefusedNamingTheField) {
  const json base = json::parse(Slurp(kData));
  struct Case {
    const char* what;
    std::function<void(json&)> mutate;
    const char* expect;
  };
  auto add = [](json& d, std::vector<std::pair<std::string, int>> tokens, std::vector<std::string> merges) {
    for (auto& [t, id] : tokens) d["model"]["vocab"][t] = id;
    for (auto& m : merges) d["model"]["merges"].push_back(m);
  };
  const std::vector<Case> cases = {
      {"model type", [](json& d) { d["model"]["type"] = "WordPiece"; }, "model.type"},
      {"vocab id", [](json& d) { d["model"]["vocab"]["Hello"] = "x"; }, "model.vocab[\"Hello\"]: not an integer"},
      {"negative id", [](json& d) { d["model"]["vocab"]["Hello"] = -4; }, "outside [0, 2^24)"},
      {"shared id", [](json& d) { d["model"]["vocab"]["Zz"] = 5; }, "is given to two tokens"},
      {"missing byte", [](json& d) { d["model"]["vocab"].erase("\xc4\x80"); }, "byte 0x00 has no token"},
      {"not byte-level", [](json& d) { d["model"]["vocab"]["\xe2\x98\x83"] = 700; }, "not byte-level text"},
      {"merge part", [](json& d) { d["model"]["merges"].push_back("Q \xe2\x98\x83"); }, "model.merges[405]"},
      {"merge shape", [](json& d) { d["model"]["merges"].push_back("a b c"); }, "not two tokens"},
      {"merge twice", [](json& d) { d["model"]["merges"].push_back(d["model"]["merges"][0]); }, "listed twice"},
      {"unsupported pre-tokenizer",
       [](json& d) { d["pre_tokenizer"]["pretokenizers"][0] = json{{"type", "Whitespace"}}; },
       "pre_tokenizer.pretokenizers[0].type"},
      {"bad behavior", [](json& d) { d["pre_tokenizer"]["pretokenizers"][1]["behavior"] = "Split"; }, ".behavior"},
      {"prefix space", [](json& d) { d["pre_tokenizer"]["pretokenizers"][3]["add_prefix_space"] = true; },
       "add_prefix_space"},
      {"no ByteLevel", [](json& d) { d["pre_tokenizer"]["pretokenizers"].erase(3); }, "has no ByteLevel"},
      {"split after ByteLevel",
       [](json& d) { d["pre_tokenizer"]["pretokenizers"].push_back(d["pre_tokenizer"]["pretokenizers"][0]); },
       "after ByteLevel"},
      {"normalizer", [](json& d) { d["normalizer"] = json{{"type", "NFC"}}; }, "normalizer"},
      {"added id", [](json& d) { d["added_tokens"][0]["content"] = "<bos>"; }, "is the added token '<bos>'"},
      {"added twice", [](json& d) { d["added_tokens"][4]["content"] = "<｜User｜>"; }, "appears twice"},
      {"suffix", [](json& d) { d["model"]["end_of_word_suffix"] = "</w>"; }, "model.end_of_word_suffix"},
      // Rank order would join Q + XZ where the release can only join QX + Z.
      {"unreachable merge",
       [&](json& d) { add(d, {{"XZ", 669}, {"QX", 670}, {"QXZ", 671}}, {"X Z", "Q X", "QX Z"}); },
       "'Q' + 'XZ' (ids"},
      {"merge order", [&](json& d) { add(d, {{"XZ", 669}, {"QX", 670}}, {"Q X", "X Z"}); },
       "merge priority must follow id order"},
      {"token without merge", [&](json& d) { add(d, {{"QZ", 669}}, {}); }, "not a listed merge"},
      {"token out of reach", [&](json& d) { add(d, {{"QXZ", 669}}, {}); }, "stops at 3 tokens"},
      {"long token", [&](json& d) { add(d, {{std::string(1100, 'Q'), 669}}, {}); }, "1100 bytes long"},
  };
  for (const Case& c : cases) {
    json d = base;
    c.mutate(d);
    auto r = convert::ConvertHfTokenizer(d.dump(), "ckpt/tokenizer.json", 0);
    ASSERT_FALSE(r) << c.what;
    EXPECT_NE(r.error().message().find(c.expect), std::string::npos) << c.what << ": " << r.error().message();
    EXPECT_EQ(r.error().message().rfind("ckpt/tokenizer.json: ", 0), 0u) << r.error().message();
  }
  EXPECT_FALSE(convert::ConvertHfTokenizer("{\"model\": [", "t.json", 0));
  EXPECT_FALSE(convert::ConvertHfTokenizer("[]", "t.json", 0));
}

TEST(HfTokenizer, BrokenSidecarIsRefusedAtOpen) {
  TempDir dir;
  auto out = ConvertInto(dir, Slurp(kData));
  ASSERT_TRUE(out) << out.error().message();
  const std::string side = *out + "/pretokenizer.json";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"{\"splits\": [", "not valid JSON"},
      {"[]", "expected an object"},
      {"{\"bos_id\": 0}", "\"splits\" must be an array"},
      {"{\"splits\": [{\"pattern\": \"a\", \"behavior\": \"Isolated\"}], \"extra\": 1}", "unknown key \"extra\""},
      {"{\"splits\": [{\"pattern\": \"a\", \"behavior\": \"Split\"}]}", "split 0: \"behavior\""},
      {"{\"splits\": [{\"pattern\": \"\", \"behavior\": \"Isolated\"}]}", "\"pattern\" must be"},
      {"{\"splits\": [{\"pattern\": \"a\", \"behavior\": \"Isolated\", \"invert\": 1}]}", "\"invert\""},
      {"{\"splits\": [{\"pattern\": \"a\", \"behavior\": \"Isolated\"}, {\"pattern\": \"(x\", \"behavior\": "
       "\"Isolated\"}]}",
       "split 1 pattern '(x' does not compile"},
      {"{\"splits\": [{\"pattern\": \"a*\", \"behavior\": \"Isolated\"}]}", "pattern 'a*' can match the empty string"},
      {"{\"splits\": [{\"pattern\": \"a\", \"behavior\": \"Isolated\"}], \"bos_id\": 7}", "bos_id 7 is not one"},
      {"{\"splits\": [{\"pattern\": \"a\", \"behavior\": \"Isolated\"}], \"bos_id\": -1}", "\"bos_id\""},
  };
  for (const auto& [content, expect] : cases) {
    Write(side, content);
    auto tok = Tokenizer::Load(*out);
    ASSERT_FALSE(tok) << content;
    EXPECT_NE(tok.error().message().find(expect), std::string::npos) << content << ": " << tok.error().message();
    EXPECT_NE(tok.error().message().find("pretokenizer.json"), std::string::npos) << tok.error().message();
  }
  // Over the sidecar size limit (4 MiB): refused by the file rule.
  Write(side, "{\"splits\": [{\"pattern\": \"a\", \"behavior\": \"Isolated\"}]}" + std::string(5 << 20, ' '));
  auto big = Tokenizer::Load(*out);
  ASSERT_FALSE(big);
  EXPECT_NE(big.error().message().find("pretokenizer"), std::string::npos) << big.error().message();
  // Without the sidecar the container opens as before: Kimi's pattern and
  // the positional BOS (the warp-tiny-tok fixture tests prove the ids).
  std::filesystem::remove(side);
  auto kimi = Tokenizer::Load(*out);
  ASSERT_TRUE(kimi) << kimi.error().message();
  EXPECT_EQ(kimi->bos_id(), 661);  // the number of rank lines
}

}  // namespace
}  // namespace waste
