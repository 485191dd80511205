#include "tokenizer_gen.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <nlohmann/json.hpp>
#include <utility>

namespace waste::gen {
namespace {

// Our own words; only their letter statistics matter.
constexpr const char* kText = R"TXT(The engine keeps the dense trunk of the model in memory and reads the routed experts from the disk when the router asks for them. Every token passes through the same layers, but each layer only needs a few of its experts, so the working set of one token is small while the whole model is large. The cache remembers the experts that were used recently and the experts that are used often, and it reads the others in the background while the attention of the next layer is still running.

A container is a directory. The manifest describes the model, the trunk holds the tensors that stay in memory, the codebooks hold the vectors that the experts are built from, and every expert bank holds one record for each expert of its layer. A record starts with a header that names its layer and its expert, then come the indices of the gate, the up and the down matrix, then the scales of every row, and then zeros until the record fills whole pages.

When the reader opens a container it checks everything before it trusts anything: the version of the format, the range of every dimension, the offsets of every tensor, the names of the bank files and the shape of every tensor the forward pass will use. A container that is damaged is refused with a message that says which file is wrong, which field is wrong, and what the reader expected to find there.

The tokenizer splits the text into pieces, and then it merges the bytes of every piece into tokens, always choosing the pair whose merged token has the lowest rank. The most common words of the language become single tokens, and the rare words are spelled with several smaller tokens. Numbers are split into groups of at most three digits, such as 2024, 163840 and 3.14159, and the spaces that come before a word are kept with the word.

The memory plan adds the trunk, the state of the attention layers, the scratch buffers and the smallest expert cache that can hold the experts of one layer twice. The budget that the user gives must be at least this floor. The rest of the budget becomes the expert cache, and a larger cache means that more of the experts that the next token needs are already in memory, so the disk is read less and the tokens come faster.

Here is a small function that the model might be asked to explain:

    int sum(const int *values, int count) {
        int total = 0;
        for (int i = 0; i < count; i++) total += values[i];
        return total;
    }

The function returns the sum of the values. If the count is zero the loop does not run and the function returns zero. If the values are very large the total can overflow, and the result is then not the true sum of the values.

Questions and answers: What does the router do? It scores every expert for the current token and keeps the best ones. Why are the experts stored on the disk? Because the model is much larger than the memory of most computers. What happens when the cache is too small? The same experts are read again and again, and the speed of the disk decides the speed of the model.
)TXT";

bool IsLetter(unsigned char c) { return std::isalpha(c) != 0 || c >= 0x80; }
bool IsDigit(unsigned char c) { return std::isdigit(c) != 0; }
bool IsSpace(unsigned char c) { return std::isspace(c) != 0; }
bool IsNewline(unsigned char c) { return c == '\n' || c == '\r'; }

// An ASCII approximation of the Kimi pre-tokenizer (ENGINE.md §9.2), only
// used to decide which merges to learn.
std::vector<std::string> PreTokenize(const std::string& s) {
  std::vector<std::string> out;
  const size_t n = s.size();
  size_t i = 0;
  auto u = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  while (i < n) {
    size_t start = i;
    unsigned char c = u(i);
    bool lead = !IsLetter(c) && !IsDigit(c) && !IsNewline(c) && i + 1 < n && IsLetter(u(i + 1));
    if (IsLetter(c) || lead) {
      i += lead ? 1 : 0;
      while (i < n && IsLetter(u(i))) ++i;
      if (i + 1 < n && s[i] == '\'') {
        static const char* const kSuffix[] = {"ll", "re", "ve", "s", "t", "m", "d"};
        for (const char* suf : kSuffix) {
          size_t len = std::char_traits<char>::length(suf);
          if (s.compare(i + 1, len, suf) == 0) {
            i += 1 + len;
            break;
          }
        }
      }
    } else if (IsDigit(c)) {
      while (i < n && IsDigit(u(i)) && i - start < 3) ++i;
    } else if (!IsSpace(c) || (c == ' ' && i + 1 < n && !IsSpace(u(i + 1)) &&
                               !IsLetter(u(i + 1)) && !IsDigit(u(i + 1)))) {
      if (c == ' ') ++i;
      while (i < n && !IsSpace(u(i)) && !IsLetter(u(i)) && !IsDigit(u(i))) ++i;
      while (i < n && IsNewline(u(i))) ++i;
    } else {
      while (i < n && IsSpace(u(i))) ++i;
      // Leave one space to lead the next word ("\s+(?!\S)").
      if (i < n && i - start > 1 && u(i - 1) == ' ' && !IsSpace(u(i))) --i;
    }
    if (i == start) ++i;
    out.push_back(s.substr(start, i - start));
  }
  return out;
}

std::string Base64(const std::string& bytes) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 3 <= bytes.size(); i += 3) {
    uint32_t v = (static_cast<unsigned char>(bytes[i]) << 16) |
                 (static_cast<unsigned char>(bytes[i + 1]) << 8) |
                 static_cast<unsigned char>(bytes[i + 2]);
    for (int k = 18; k >= 0; k -= 6) out += kAlphabet[(v >> k) & 63];
  }
  size_t rest = bytes.size() - i;
  if (rest > 0) {
    uint32_t v = static_cast<unsigned char>(bytes[i]) << 16;
    if (rest == 2) v |= static_cast<unsigned char>(bytes[i + 1]) << 8;
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += rest == 2 ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

}  // namespace

const std::string& TrainingText() {
  static const std::string text(kText);
  return text;
}

GeneratedTokenizer MakeTokenizer(int max_merges) {
  GeneratedTokenizer t;
  for (int b = 0; b < 256; ++b) t.tokens.emplace_back(1, static_cast<char>(b));
  std::map<std::string, int> rank_of;
  for (int b = 0; b < 256; ++b) rank_of[t.tokens[b]] = b;

  // Distinct pieces with counts, each as a list of token ids.
  std::map<std::string, long> piece_count;
  for (const std::string& p : PreTokenize(TrainingText())) ++piece_count[p];
  std::vector<std::pair<std::vector<int>, long>> words;
  for (const auto& [piece, count] : piece_count) {
    std::vector<int> ids;
    for (unsigned char c : piece) ids.push_back(c);
    words.emplace_back(std::move(ids), count);
  }

  for (int merge = 0; merge < max_merges; ++merge) {
    std::map<std::pair<int, int>, long> pairs;
    for (const auto& [ids, count] : words) {
      for (size_t i = 0; i + 1 < ids.size(); ++i) pairs[{ids[i], ids[i + 1]}] += count;
    }
    // Most frequent pair; ties go to the smallest ids (deterministic).
    std::pair<int, int> best{-1, -1};
    long best_count = 1;
    for (const auto& [p, count] : pairs) {
      if (count > best_count) {
        best = p;
        best_count = count;
      }
    }
    if (best.first < 0) break;  // nothing repeats any more
    std::string bytes = t.tokens[best.first] + t.tokens[best.second];
    int id;
    auto it = rank_of.find(bytes);
    if (it != rank_of.end()) {
      id = it->second;
    } else {
      id = static_cast<int>(t.tokens.size());
      t.tokens.push_back(bytes);
      rank_of[bytes] = id;
    }
    for (auto& [ids, count] : words) {
      std::vector<int> merged;
      merged.reserve(ids.size());
      for (size_t i = 0; i < ids.size(); ++i) {
        if (i + 1 < ids.size() && ids[i] == best.first && ids[i + 1] == best.second) {
          merged.push_back(id);
          ++i;
        } else {
          merged.push_back(ids[i]);
        }
      }
      ids = std::move(merged);
    }
  }
  t.n_ranks = static_cast<int>(t.tokens.size());
  for (int r = 0; r < t.n_ranks; ++r) {
    t.tokenizer_model += fmt::format("{} {}\n", Base64(t.tokens[r]), r);
  }

  static const char* const kSpecials[] = {
      "[BOS]", "[EOS]", "<|end_of_msg|>", "<|open|>", "<|close|>", "<|sep|>",
      "<|media_begin|>", "<|media_content|>", "<|media_pad|>", "<|media_end|>",
      "<|kimi_image_placeholder|>"};
  nlohmann::ordered_json specials = nlohmann::ordered_json::array();
  for (const char* s : kSpecials) {
    specials.push_back({{"id", t.n_ranks + t.n_specials}, {"text", s}});
    ++t.n_specials;
  }
  t.specials_json = specials.dump(1) + "\n";

  nlohmann::ordered_json chat = {
      {"system", {"<|open|>system<|sep|>", "<|end_of_msg|>"}},
      {"user", {"<|open|>user<|sep|>", "<|end_of_msg|>"}},
      {"assistant", {"<|open|>assistant<|sep|>", "<|end_of_msg|>"}},
      {"open", "<|open|>assistant<|sep|>"}};
  t.chat_json = chat.dump(1) + "\n";
  return t;
}

}  // namespace waste::gen
