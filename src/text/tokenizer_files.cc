#include "text/tokenizer_files.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <unordered_map>
#include <unordered_set>

#include "base/base64.h"
#include "platform/platform.h"

namespace waste {
namespace {

// Standard alphabet; '=' padding optional but only at the end.
bool DecodeBase64(std::string_view in, std::string* out) {
  out->clear();
  while (!in.empty() && in.back() == '=') in.remove_suffix(1);
  if (in.size() % 4 == 1) return false;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : in) {
    const int v = Base64Value(c);
    if (v < 0) return false;
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return true;
}

bool ParseRank(std::string_view s, int* rank) {
  if (s.empty() || s.size() > 9) return false;
  int v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
    v = v * 10 + (c - '0');
  }
  *rank = v;
  return true;
}

std::string Where(std::string_view name, size_t line) {
  return std::string(name) + " line " + std::to_string(line);
}

}  // namespace

Result<std::vector<RankedToken>> ParseRankFile(std::string_view content, std::string_view name) {
  std::vector<RankedToken> tokens;
  size_t line_no = 0;
  while (!content.empty()) {
    ++line_no;
    const size_t eol = content.find('\n');
    std::string_view line = content.substr(0, eol);
    content.remove_prefix(eol == std::string_view::npos ? content.size() : eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    const size_t space = line.find(' ');
    if (space == std::string_view::npos) {
      return FormatError(Where(name, line_no) + ": expected '<base64 bytes> <rank>'");
    }
    RankedToken t;
    if (!DecodeBase64(line.substr(0, space), &t.bytes) || t.bytes.empty()) {
      return FormatError(Where(name, line_no) + ": '" + std::string(line.substr(0, space)) +
                         "' is not base64 of a non-empty token");
    }
    if (!ParseRank(line.substr(space + 1), &t.rank) || t.rank >= BytePairEncoder::kMaxRank) {
      return FormatError(Where(name, line_no) + ": rank '" + std::string(line.substr(space + 1)) +
                         "' is not an integer in [0, " + std::to_string(BytePairEncoder::kMaxRank) +
                         ")");
    }
    tokens.push_back(std::move(t));
  }
  if (tokens.empty()) return FormatError(std::string(name) + ": no tokens");
  return tokens;
}

Result<std::vector<SpecialToken>> ParseSpecials(std::string_view content, std::string_view name) {
  const nlohmann::json doc = nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return FormatError(std::string(name) + ": not valid JSON");
  if (!doc.is_array()) {
    return FormatError(std::string(name) + ": expected an array of {\"id\", \"text\"} objects");
  }
  std::vector<SpecialToken> specials;
  std::unordered_map<int, size_t> by_id;
  std::unordered_set<std::string> texts;
  for (size_t i = 0; i < doc.size(); ++i) {
    const nlohmann::json& e = doc[i];
    const std::string where = std::string(name) + " entry " + std::to_string(i);
    if (!e.is_object()) return FormatError(where + ": not an object");
    const auto id = e.find("id");
    const auto text = e.find("text");
    if (id == e.end() || !id->is_number_integer()) {
      return FormatError(where + ": \"id\" missing or not an integer");
    }
    if (text == e.end() || !text->is_string()) {
      return FormatError(where + ": \"text\" missing or not a string");
    }
    const int64_t id_value = id->get<int64_t>();
    if (id_value < 0 || id_value >= std::numeric_limits<int>::max()) {
      return FormatError(where + ": id " + std::to_string(id_value) + " is outside [0, 2^31 - 1)");
    }
    SpecialToken s{static_cast<int>(id_value), text->get<std::string>()};
    if (s.text.empty()) return FormatError(where + ": empty text");
    if (by_id.count(s.id) != 0) {
      return FormatError(where + ": id " + std::to_string(s.id) + " repeats entry " +
                         std::to_string(by_id[s.id]));
    }
    if (!texts.insert(s.text).second) {
      return FormatError(where + ": text '" + s.text + "' appears twice");
    }
    by_id[s.id] = i;
    specials.push_back(std::move(s));
  }
  return specials;
}

Result<PreTokenizerFile> ParsePreTokenizerFile(std::string_view content, std::string_view name) {
  const nlohmann::json doc = nlohmann::json::parse(content, nullptr, /*allow_exceptions=*/false);
  const std::string file(name);
  if (doc.is_discarded()) return FormatError(file + ": not valid JSON");
  if (!doc.is_object()) return FormatError(file + ": expected an object with \"splits\"");
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    if (it.key() != "splits" && it.key() != "bos_id") {
      return FormatError(file + ": unknown key \"" + it.key() + "\"");
    }
  }
  PreTokenizerFile out;
  if (doc.contains("bos_id")) {
    const nlohmann::json& b = doc["bos_id"];
    if (!b.is_number_integer() || b.get<int64_t>() < 0 || b.get<int64_t>() >= std::numeric_limits<int>::max()) {
      return FormatError(file + ": \"bos_id\" is not an integer in [0, 2^31 - 1)");
    }
    out.bos_id = static_cast<int>(b.get<int64_t>());
  }
  const auto splits = doc.find("splits");
  if (splits == doc.end() || !splits->is_array() || splits->size() > 64) {
    return FormatError(file + ": \"splits\" must be an array of at most 64 rules");
  }
  static const std::pair<const char*, SplitBehavior> kBehaviors[] = {
      {"Removed", SplitBehavior::kRemoved},
      {"Isolated", SplitBehavior::kIsolated},
      {"MergedWithPrevious", SplitBehavior::kMergedWithPrevious},
      {"MergedWithNext", SplitBehavior::kMergedWithNext},
      {"Contiguous", SplitBehavior::kContiguous}};
  for (size_t i = 0; i < splits->size(); ++i) {
    const nlohmann::json& e = (*splits)[i];
    const std::string where = file + " split " + std::to_string(i);
    if (!e.is_object()) return FormatError(where + ": not an object");
    for (auto it = e.begin(); it != e.end(); ++it) {
      if (it.key() != "pattern" && it.key() != "behavior" && it.key() != "invert") {
        return FormatError(where + ": unknown key \"" + it.key() + "\"");
      }
    }
    SplitRule rule;
    const auto pattern = e.find("pattern");
    if (pattern == e.end() || !pattern->is_string() || pattern->get_ref<const std::string&>().empty() ||
        pattern->get_ref<const std::string&>().size() > 65536) {
      return FormatError(where + ": \"pattern\" must be a string of 1 to 65536 bytes");
    }
    rule.pattern = pattern->get<std::string>();
    const auto behavior = e.find("behavior");
    bool known = false;
    if (behavior != e.end() && behavior->is_string()) {
      for (const auto& [text, value] : kBehaviors) {
        if (*behavior == text) rule.behavior = value, known = true;
      }
    }
    if (!known) {
      return FormatError(where + ": \"behavior\" must be one of Removed, Isolated, MergedWithPrevious, "
                                 "MergedWithNext, Contiguous");
    }
    const auto invert = e.find("invert");
    if (invert != e.end()) {
      if (!invert->is_boolean()) return FormatError(where + ": \"invert\" must be true or false");
      rule.invert = invert->get<bool>();
    }
    out.splits.push_back(std::move(rule));
  }
  return out;
}

Result<std::string> ReadWholeFile(const std::string& path, uint64_t max_bytes,
                                  std::string_view what, bool* missing) {
  return platform::ReadRegularFile(path, max_bytes, what, missing);
}

}  // namespace waste
