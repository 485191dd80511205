#include "convert/hf_tokenizer.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdint>
#include <limits>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace waste::convert {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxTokens = int64_t{1} << 24;  // the engine's rank limit
constexpr size_t kMaxSplits = 64;
constexpr size_t kMaxPatternBytes = 64 << 10;
// Token length and the sum of squared lengths bound the merge check's time
// (real vocabularies: tens of bytes at most, a sum near 10^7).
constexpr size_t kMaxTokenBytes = 1024;
constexpr uint64_t kMaxCheckWork = uint64_t{1} << 31;

// GPT-2's byte-to-unicode table (what HF's ByteLevel uses): printable
// Latin-1 bytes stand for themselves, the other 68 bytes map to U+0100.. in
// byte order. Returns codepoint -> byte, -1 for codepoints outside it.
std::array<int, 324> UnicodeToByte() {
  std::array<int, 324> inv;
  inv.fill(-1);
  int next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    inv[static_cast<size_t>(printable ? b : next++)] = b;
  }
  return inv;
}

// The bytes a byte-level token string stands for; false when a character
// is outside the alphabet (or the string is not UTF-8).
bool ByteLevelDecode(std::string_view s, std::string* out) {
  static const std::array<int, 324> inv = UnicodeToByte();
  out->clear();
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<uint8_t>(s[i]);
    uint32_t cp = 0;
    int len = 0;
    if (c < 0x80) {
      cp = c, len = 1;
    } else if ((c & 0xE0) == 0xC0 && i + 1 < s.size() && (static_cast<uint8_t>(s[i + 1]) & 0xC0) == 0x80) {
      cp = ((c & 0x1Fu) << 6) | (static_cast<uint8_t>(s[i + 1]) & 0x3Fu), len = 2;
    } else {
      return false;  // everything in the alphabet is below U+0800
    }
    if (cp >= inv.size() || inv[cp] < 0) return false;
    out->push_back(static_cast<char>(inv[cp]));
    i += static_cast<size_t>(len);
  }
  return !out->empty();
}

// A token for messages: its release spelling, cut short.
std::string Show(std::string_view s) {
  return s.size() <= 40 ? std::string(s) : std::string(s.substr(0, 40)) + "...";
}

// Escapes a literal so PCRE2 and Python's `regex` read it literally:
// every ASCII character that is not a letter or digit gets a backslash.
std::string EscapeLiteral(std::string_view s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 0x80 && !std::isalnum(u)) {
      if (c == '\n') { out += "\\n"; continue; }
      if (c == '\r') { out += "\\r"; continue; }
      if (c == '\t') { out += "\\t"; continue; }
      if (u < 0x20 || u == 0x7F) { out += fmt::format("\\x{{{:02x}}}", u); continue; }
      out += '\\';
    }
    out += c;
  }
  return out;
}

// GPT-2's pattern, what ByteLevel splits with when use_regex is true.
constexpr const char* kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Context {
  const std::string& name;
  std::string Where(std::string_view field) const { return fmt::format("{}: {}", name, field); }
};

Status Refuse(const Context& c, std::string_view field, const std::string& why) {
  return FormatError(c.Where(field) + ": " + why);
}

// Appends the Split rules of one pre-tokenizer entry (or of a Sequence).
Status CollectSplits(const Context& c, const Json& pt, const std::string& field, Json* splits,
                     bool* byte_level, int depth) {
  if (!pt.is_object() || !pt.contains("type") || !pt["type"].is_string()) {
    return Refuse(c, field, "expected an object with a string \"type\"");
  }
  const std::string type = pt["type"].get<std::string>();
  if (*byte_level) {
    return Refuse(c, field, "a " + type + " after ByteLevel would split byte-level text (unsupported)");
  }
  if (type == "Sequence") {
    if (depth > 4) return Refuse(c, field, "Sequence nested too deeply");
    if (!pt.contains("pretokenizers") || !pt["pretokenizers"].is_array()) {
      return Refuse(c, field + ".pretokenizers", "expected an array");
    }
    const Json& list = pt["pretokenizers"];
    for (size_t i = 0; i < list.size(); ++i) {
      WASTE_TRY(CollectSplits(c, list[i], fmt::format("{}.pretokenizers[{}]", field, i), splits,
                              byte_level, depth + 1));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    if (pt.contains("add_prefix_space") && !pt["add_prefix_space"].is_boolean()) {
      return Refuse(c, field + ".add_prefix_space", "expected a boolean");
    }
    if (pt.value("add_prefix_space", false)) {
      return Refuse(c, field + ".add_prefix_space", "true is not supported (waste adds no prefix space)");
    }
    if (pt.contains("use_regex") && !pt["use_regex"].is_boolean()) {
      return Refuse(c, field + ".use_regex", "expected a boolean");
    }
    // HF's default for use_regex is true: GPT-2's pattern, isolated.
    if (pt.value("use_regex", true)) {
      if (splits->size() >= kMaxSplits) {
        return Refuse(c, field, fmt::format("more than {} Split rules", kMaxSplits));
      }
      splits->push_back(Json{{"pattern", kGpt2Pattern}, {"behavior", "Isolated"}, {"invert", false}});
    }
    *byte_level = true;
    return Status::Ok();
  }
  if (type != "Split") {
    return Refuse(c, field + ".type", "pre-tokenizer '" + type +
                                          "' is not supported (only Sequence, Split and ByteLevel)");
  }
  if (!pt.contains("pattern") || !pt["pattern"].is_object() || pt["pattern"].size() != 1) {
    return Refuse(c, field + ".pattern", "expected {\"Regex\": ...} or {\"String\": ...}");
  }
  std::string pattern;
  if (pt["pattern"].contains("Regex") && pt["pattern"]["Regex"].is_string()) {
    pattern = pt["pattern"]["Regex"].get<std::string>();
  } else if (pt["pattern"].contains("String") && pt["pattern"]["String"].is_string()) {
    pattern = EscapeLiteral(pt["pattern"]["String"].get<std::string>());
  } else {
    return Refuse(c, field + ".pattern", "expected {\"Regex\": string} or {\"String\": string}");
  }
  if (pattern.empty() || pattern.size() > kMaxPatternBytes) {
    return Refuse(c, field + ".pattern", fmt::format("empty or over {} bytes", kMaxPatternBytes));
  }
  static const std::unordered_set<std::string> kBehaviors = {"Removed", "Isolated", "MergedWithPrevious",
                                                             "MergedWithNext", "Contiguous"};
  if (!pt.contains("behavior") || !pt["behavior"].is_string() ||
      kBehaviors.count(pt["behavior"].get<std::string>()) == 0) {
    return Refuse(c, field + ".behavior",
                  "expected one of Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous");
  }
  if (pt.contains("invert") && !pt["invert"].is_boolean()) {
    return Refuse(c, field + ".invert", "expected a boolean");
  }
  if (splits->size() >= kMaxSplits) return Refuse(c, field, fmt::format("more than {} Split rules", kMaxSplits));
  splits->push_back(Json{{"pattern", pattern}, {"behavior", pt["behavior"]}, {"invert", pt.value("invert", false)}});
  return Status::Ok();
}

Status CheckModelOptions(const Context& c, const Json& model) {
  if (!model.contains("type") || model["type"] != "BPE") {
    return Refuse(c, "model.type", "expected \"BPE\" (waste converts byte-level BPE only)");
  }
  for (const char* k : {"dropout", "continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(k) && !model[k].is_null() && !(model[k].is_string() && model[k].get<std::string>().empty())) {
      return Refuse(c, std::string("model.") + k, "must be null (not supported)");
    }
  }
  if (model.contains("byte_fallback") && model["byte_fallback"] != false) {
    return Refuse(c, "model.byte_fallback", "must be false (not supported)");
  }
  return Status::Ok();
}

struct ViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const noexcept { return std::hash<std::string_view>()(s); }
};
using RankMap = std::unordered_map<std::string, int, ViewHash, std::equal_to<>>;

// Lowest-rank-first BPE over `bytes` (no whole-piece shortcut), as the
// engine runs it, with each adjacent pair's rank cached: O(L^2) for a token
// of L bytes. Returns the number of parts left; `*last` gets the byte
// lengths of the two parts merged last when it ends in one token.
size_t RankBpe(std::string_view bytes, const RankMap& rank_of, std::pair<size_t, size_t>* last) {
  constexpr int kNone = std::numeric_limits<int>::max();
  std::vector<size_t> start(bytes.size());
  for (size_t i = 0; i < bytes.size(); ++i) start[i] = i;
  auto end_of = [&](size_t i) { return i + 1 < start.size() ? start[i + 1] : bytes.size(); };
  auto pair_rank = [&](size_t i) {
    if (i + 1 >= start.size()) return kNone;
    const auto it = rank_of.find(bytes.substr(start[i], end_of(i + 1) - start[i]));
    return it == rank_of.end() ? kNone : it->second;
  };
  std::vector<int> rank(start.size());
  for (size_t i = 0; i < start.size(); ++i) rank[i] = pair_rank(i);
  while (start.size() > 1) {
    size_t at = 0;
    for (size_t i = 1; i + 1 < start.size(); ++i) {
      if (rank[i] < rank[at]) at = i;
    }
    if (rank[at] == kNone) break;
    if (start.size() == 2) *last = {start[1] - start[0], bytes.size() - start[1]};
    start.erase(start.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    rank.erase(rank.begin() + static_cast<std::ptrdiff_t>(at) + 1);
    rank[at] = pair_rank(at);
    if (at > 0) rank[at - 1] = pair_rank(at - 1);
  }
  return start.size();
}

}  // namespace

Result<HfTokenizerFiles> ConvertHfTokenizer(std::string_view json_text, const std::string& name, int bos_id) {
  const Context c{name};
  const Json doc = Json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return FormatError(name + ": not valid JSON");
  if (!doc.is_object()) return FormatError(name + ": expected a JSON object");
  if (!doc.contains("model") || !doc["model"].is_object()) return Refuse(c, "model", "missing or not an object");
  const Json& model = doc["model"];
  WASTE_TRY(CheckModelOptions(c, model));
  if (doc.contains("normalizer") && !doc["normalizer"].is_null()) {
    const Json& n = doc["normalizer"];
    const bool empty_sequence = n.is_object() && n.value("type", "") == "Sequence" && n.contains("normalizers") &&
                                n["normalizers"].is_array() && n["normalizers"].empty();
    if (!empty_sequence) return Refuse(c, "normalizer", "must be null (normalizers are not supported)");
  }

  // Added tokens: ids and texts, both unique.
  std::unordered_map<int64_t, std::string> added;
  std::vector<std::pair<int64_t, std::string>> added_list;
  if (doc.contains("added_tokens") && !doc["added_tokens"].is_null()) {
    if (!doc["added_tokens"].is_array()) return Refuse(c, "added_tokens", "expected an array");
    std::unordered_set<std::string> texts;
    const Json& list = doc["added_tokens"];
    for (size_t i = 0; i < list.size(); ++i) {
      const std::string field = fmt::format("added_tokens[{}]", i);
      const Json& e = list[i];
      if (!e.is_object()) return Refuse(c, field, "not an object");
      if (!e.contains("id") || !e["id"].is_number_integer()) return Refuse(c, field + ".id", "missing or not an integer");
      if (!e.contains("content") || !e["content"].is_string()) {
        return Refuse(c, field + ".content", "missing or not a string");
      }
      const int64_t id = e["id"].get<int64_t>();
      const std::string text = e["content"].get<std::string>();
      if (id < 0 || id >= std::numeric_limits<int>::max()) {
        return Refuse(c, field + ".id", fmt::format("{} is outside [0, 2^31 - 1)", id));
      }
      if (text.empty()) return Refuse(c, field + ".content", "empty");
      if (added.count(id) != 0) return Refuse(c, field + ".id", fmt::format("{} appears twice", id));
      if (!texts.insert(text).second) return Refuse(c, field + ".content", "'" + Show(text) + "' appears twice");
      added[id] = text;
      added_list.emplace_back(id, text);
    }
  }

  // Vocabulary: byte strings by id. Entries that are added tokens stay
  // specials; every other one must be byte-level text.
  if (!model.contains("vocab") || !model["vocab"].is_object()) return Refuse(c, "model.vocab", "missing or not an object");
  const Json& vocab = model["vocab"];
  if (vocab.empty() || static_cast<int64_t>(vocab.size()) > kMaxTokens) {
    return Refuse(c, "model.vocab", fmt::format("{} entries (expected 1..2^24)", vocab.size()));
  }
  std::unordered_map<std::string, int> id_of_text;    // release spelling -> id
  uint64_t check_work = 0;                            // sum of squared token lengths
  std::unordered_map<int, std::string> bytes_of_id;   // rank tokens only
  RankMap rank_of;                                     // bytes -> id
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const std::string field = "model.vocab[\"" + Show(it.key()) + "\"]";
    if (!it.value().is_number_integer()) return Refuse(c, field, "not an integer");
    const int64_t id = it.value().get<int64_t>();
    if (id < 0 || id >= kMaxTokens) return Refuse(c, field, fmt::format("id {} is outside [0, 2^24)", id));
    const int i = static_cast<int>(id);
    if (bytes_of_id.count(i) != 0) return Refuse(c, field, fmt::format("id {} is given to two tokens", id));
    id_of_text[it.key()] = i;
    const auto a = added.find(id);
    if (a != added.end()) {
      if (a->second != it.key()) {
        return Refuse(c, field, fmt::format("id {} is the added token '{}' but the vocabulary spells it '{}'", id,
                                            Show(a->second), Show(it.key())));
      }
      continue;  // a special: matched whole, never merged into
    }
    std::string bytes;
    if (!ByteLevelDecode(it.key(), &bytes)) {
      return Refuse(c, field, "not byte-level text (a character outside the ByteLevel alphabet) and not an added token");
    }
    if (bytes.size() > kMaxTokenBytes) {
      return Refuse(c, field, fmt::format("{} bytes long (at most {})", bytes.size(), kMaxTokenBytes));
    }
    check_work += static_cast<uint64_t>(bytes.size()) * bytes.size();
    if (check_work > kMaxCheckWork) {
      return Refuse(c, "model.vocab", "its tokens are too long in total to check against the merges");
    }
    bytes_of_id[i] = bytes;
    rank_of[bytes] = i;
  }
  for (int b = 0; b < 256; ++b) {
    if (rank_of.count(std::string(1, static_cast<char>(b))) == 0) {
      return Refuse(c, "model.vocab", fmt::format("byte 0x{:02X} has no token (every byte must be one)", b));
    }
  }

  // Merges: parts and result byte-level tokens of the vocabulary. A pair
  // listed twice is refused (which one counts is unclear).
  if (!model.contains("merges") || !model["merges"].is_array()) return Refuse(c, "model.merges", "missing or not an array");
  const Json& merges = model["merges"];
  if (static_cast<int64_t>(merges.size()) > kMaxTokens) return Refuse(c, "model.merges", "more than 2^24 entries");
  std::unordered_map<uint64_t, size_t> merge_index;  // (left id, right id) -> position in merges
  auto pair_key = [](int l, int r) { return (static_cast<uint64_t>(l) << 32) | static_cast<uint32_t>(r); };
  for (size_t m = 0; m < merges.size(); ++m) {
    const std::string field = fmt::format("model.merges[{}]", m);
    std::string left, right;
    if (merges[m].is_string()) {
      const std::string s = merges[m].get<std::string>();
      const size_t sp = s.find(' ');
      if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos) {
        return Refuse(c, field, "'" + Show(s) + "' is not two tokens separated by one space");
      }
      left = s.substr(0, sp), right = s.substr(sp + 1);
    } else if (merges[m].is_array() && merges[m].size() == 2 && merges[m][0].is_string() && merges[m][1].is_string()) {
      left = merges[m][0].get<std::string>(), right = merges[m][1].get<std::string>();
    } else {
      return Refuse(c, field, "expected \"a b\" or [\"a\", \"b\"]");
    }
    for (const std::string* part : {&left, &right}) {
      const auto it = id_of_text.find(*part);
      if (it == id_of_text.end() || bytes_of_id.count(it->second) == 0) {
        return Refuse(c, field, "'" + Show(*part) + "' is not a byte-level token of model.vocab");
      }
    }
    const auto result = id_of_text.find(left + right);
    if (result == id_of_text.end() || bytes_of_id.count(result->second) == 0) {
      return Refuse(c, field, "'" + Show(left + right) + "' is not a byte-level token of model.vocab");
    }
    if (!merge_index.emplace(pair_key(id_of_text[left], id_of_text[right]), m).second) {
      return Refuse(c, field, "'" + Show(left) + " " + Show(right) + "' is listed twice");
    }
  }

  // The release merges by merge-list position, waste by rank (= id) over
  // whole concatenations. They agree on every input when (docs/CONVERT.md
  // "Why ranks reproduce the merges"): lowest-rank-first BPE over each
  // multi-byte token's own bytes ends in that token, its last step joins a
  // pair that is a listed merge, and those merges' positions rise with the
  // tokens' ids.
  std::vector<int> ids;
  ids.reserve(bytes_of_id.size());
  for (const auto& [id, bytes] : bytes_of_id) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  std::unordered_map<int, std::string> spelling;
  for (const auto& [text, id] : id_of_text) spelling[id] = text;
  int64_t last_position = -1;
  int last_id = -1;
  for (int id : ids) {
    const std::string& bytes = bytes_of_id[id];
    if (bytes.size() < 2) continue;
    std::pair<size_t, size_t> last;
    const size_t parts = RankBpe(bytes, rank_of, &last);
    if (parts != 1) {
      return Refuse(c, "model.vocab", fmt::format(
          "token '{}' (id {}): lowest-rank-first BPE over its bytes stops at {} tokens, so waste would "
          "produce it only when a whole piece spells it, where the release never would",
          Show(spelling[id]), id, parts));
    }
    const int l = rank_of.find(std::string_view(bytes).substr(0, last.first))->second;
    const int r = rank_of.find(std::string_view(bytes).substr(last.first))->second;
    const auto m = merge_index.find(pair_key(l, r));
    if (m == merge_index.end()) {
      return Refuse(c, "model.merges", fmt::format(
          "token '{}' (id {}): lowest-rank-first BPE reaches it by joining '{}' + '{}' (ids {} + {}), which "
          "is not a listed merge; waste merges by rank, so this vocabulary would tokenize differently from "
          "the release", Show(spelling[id]), id, Show(spelling[l]), Show(spelling[r]), l, r));
    }
    if (static_cast<int64_t>(m->second) <= last_position) {
      return Refuse(c, "model.merges", fmt::format(
          "token '{}' (id {}) comes from model.merges[{}], before the merge of token id {} (model.merges[{}]): "
          "merge priority must follow id order, since waste merges by rank = id",
          Show(spelling[id]), id, m->second, last_id, last_position));
    }
    last_position = static_cast<int64_t>(m->second);
    last_id = id;
  }

  // Pre-tokenizer: Split rules in order; a ByteLevel must end it.
  Json splits = Json::array();
  bool byte_level = false;
  if (!doc.contains("pre_tokenizer") || doc["pre_tokenizer"].is_null()) {
    return Refuse(c, "pre_tokenizer", "missing (byte-level BPE needs a ByteLevel pre-tokenizer)");
  }
  WASTE_TRY(CollectSplits(c, doc["pre_tokenizer"], "pre_tokenizer", &splits, &byte_level, 0));
  if (!byte_level) return Refuse(c, "pre_tokenizer", "has no ByteLevel step (waste converts byte-level BPE only)");

  HfTokenizerFiles out;
  for (int id : ids) {
    const std::string& bytes = bytes_of_id[id];
    static constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string line;
    for (size_t i = 0; i < bytes.size(); i += 3) {
      uint32_t v = static_cast<uint8_t>(bytes[i]) << 16;
      if (i + 1 < bytes.size()) v |= static_cast<uint32_t>(static_cast<uint8_t>(bytes[i + 1])) << 8;
      if (i + 2 < bytes.size()) v |= static_cast<uint8_t>(bytes[i + 2]);
      line += kB64[(v >> 18) & 63];
      line += kB64[(v >> 12) & 63];
      line += i + 1 < bytes.size() ? kB64[(v >> 6) & 63] : '=';
      line += i + 2 < bytes.size() ? kB64[v & 63] : '=';
    }
    out.rank_file += fmt::format("{} {}\n", line, id);
  }
  out.rank_tokens = static_cast<int>(ids.size());
  out.merges = static_cast<int>(merges.size());

  std::sort(added_list.begin(), added_list.end());
  if (!added_list.empty()) {
    Json arr = Json::array();
    for (const auto& [id, text] : added_list) arr.push_back(Json{{"id", id}, {"text", text}});
    out.specials_json = arr.dump(1) + "\n";  // raw UTF-8: dump never escapes non-ASCII
    out.special_tokens = static_cast<int>(added_list.size());
  }
  Json side = Json::object();
  side["splits"] = splits;
  if (bos_id >= 0 && added.count(bos_id) != 0) side["bos_id"] = bos_id;
  out.pretokenizer_json = side.dump(1) + "\n";
  return out;
}

}  // namespace waste::convert
