#include "text/tokenizer.h"

#include <algorithm>
#include <utility>

#include "waste/files.h"

namespace waste {

Result<Tokenizer> Tokenizer::Load(const std::string& container_dir) {
  const std::string dir = container_dir.empty() ? "." : container_dir;
  std::string rank_path = dir + "/tokenizer.model";
  bool missing = false;
  Result<std::string> ranks = ReadWholeFile(rank_path, kMaxTokenizerBytes, "tokenizer", &missing);
  if (!ranks && missing) {
    rank_path = dir + "/tiktoken.model";
    ranks = ReadWholeFile(rank_path, kMaxTokenizerBytes, "tokenizer", &missing);
    if (!ranks && missing) {
      return UnsupportedError(dir + ": no tokenizer.model or tiktoken.model (ids only)");
    }
  }
  if (!ranks) return ranks.error();
  WASTE_ASSIGN_OR_RETURN(std::vector<RankedToken> tokens, ParseRankFile(*ranks, rank_path));

  std::vector<SpecialToken> specials;
  const std::string specials_path = dir + "/specials.json";
  Result<std::string> specials_text = ReadWholeFile(specials_path, kMaxSidecarBytes, "specials", &missing);
  if (specials_text) {
    WASTE_ASSIGN_OR_RETURN(specials, ParseSpecials(*specials_text, specials_path));
  } else if (!missing) {
    return specials_text.error();
  }
  PreTokenizerFile rules;
  const std::string rules_path = dir + "/pretokenizer.json";
  Result<std::string> rules_text = ReadWholeFile(rules_path, kMaxSidecarBytes, "pretokenizer", &missing);
  if (rules_text) {
    WASTE_ASSIGN_OR_RETURN(rules, ParsePreTokenizerFile(*rules_text, rules_path));
  } else if (!missing) {
    return rules_text.error();
  }
  Result<Tokenizer> tok = FromParts(std::move(tokens), std::move(specials),
                                    rules_text ? &rules : nullptr, rules_path);
  if (!tok) return Status(tok.error().code(), dir + ": " + tok.error().message());
  return tok;
}

Result<Tokenizer> Tokenizer::FromParts(std::vector<RankedToken> ranks,
                                       std::vector<SpecialToken> specials,
                                       const PreTokenizerFile* rules, std::string_view rules_name) {
  std::shared_ptr<const PreTokenizer> own;
  const PreTokenizer* pretokenizer = nullptr;
  if (rules != nullptr) {
    WASTE_ASSIGN_OR_RETURN(own, PreTokenizer::FromRules(rules->splits, rules_name));
    pretokenizer = own.get();
  } else {
    WASTE_ASSIGN_OR_RETURN(pretokenizer, PreTokenizer::Get());
  }
  const int rank_lines = static_cast<int>(ranks.size());
  WASTE_ASSIGN_OR_RETURN(BytePairEncoder bpe, BytePairEncoder::Build(std::move(ranks)));
  for (const SpecialToken& s : specials) {
    if (!bpe.Bytes(s.id).empty()) {
      return FormatError("special '" + s.text + "' has id " + std::to_string(s.id) +
                         ", which is already the rank of a token");
    }
  }
  if (rules != nullptr && rules->bos_id >= 0 &&
      std::none_of(specials.begin(), specials.end(), [&](const SpecialToken& s) { return s.id == rules->bos_id; })) {
    return FormatError(std::string(rules_name) + ": bos_id " + std::to_string(rules->bos_id) +
                       " is not one of the special tokens");
  }
  Tokenizer tok(std::move(bpe), std::move(specials), pretokenizer);
  tok.own_pretokenizer_ = std::move(own);
  tok.bos_id_ = rules != nullptr && rules->bos_id >= 0 ? rules->bos_id : rank_lines;
  tok.eos_id_ = rank_lines + 2;
  return tok;
}

Tokenizer::Tokenizer(BytePairEncoder bpe, std::vector<SpecialToken> specials,
                     const PreTokenizer* pretokenizer)
    : bpe_(std::move(bpe)), specials_(std::move(specials)), pretokenizer_(pretokenizer) {
  vocab_size_ = bpe_.rank_end();
  for (size_t i = 0; i < specials_.size(); ++i) {
    special_by_id_[specials_[i].id] = i;
    vocab_size_ = std::max(vocab_size_, specials_[i].id + 1);
    special_by_first_byte_[static_cast<uint8_t>(specials_[i].text[0])].push_back(
        static_cast<uint32_t>(i));
  }
  for (auto& bucket : special_by_first_byte_) {
    std::stable_sort(bucket.begin(), bucket.end(), [this](uint32_t a, uint32_t b) {
      return specials_[a].text.size() > specials_[b].text.size();
    });
  }
}

std::vector<int> Tokenizer::Encode(std::string_view text, bool markup) const {
  std::vector<int> ids;
  ids.reserve(text.size() / 3 + 1);
  EncodeTo(text, markup, &ids);
  return ids;
}

void Tokenizer::EncodeTo(std::string_view text, bool markup, std::vector<int>* out) const {
  if (!markup || specials_.empty()) {
    EncodePlain(text, out);
    return;
  }
  size_t pos = 0;
  while (pos < text.size()) {
    size_t at = 0;
    const int s = FindSpecial(text, pos, &at);
    if (s < 0) break;
    // Bounded at the special: no pre-token straddles it.
    EncodePlain(text.substr(pos, at - pos), out);
    out->push_back(specials_[static_cast<size_t>(s)].id);
    pos = at + specials_[static_cast<size_t>(s)].text.size();
  }
  EncodePlain(text.substr(pos), out);
}

void Tokenizer::EncodePlain(std::string_view text, std::vector<int>* out) const {
  pretokenizer_->Split(text, [this, out](std::string_view piece) { bpe_.Encode(piece, out); });
}

int Tokenizer::FindSpecial(std::string_view text, size_t from, size_t* at) const {
  for (size_t pos = from; pos < text.size(); ++pos) {
    const auto& bucket = special_by_first_byte_[static_cast<uint8_t>(text[pos])];
    for (uint32_t i : bucket) {
      if (text.substr(pos).starts_with(specials_[i].text)) {
        *at = pos;
        return static_cast<int>(i);
      }
    }
  }
  return -1;
}

std::string Tokenizer::Decode(std::span<const int> ids) const {
  std::string out;
  for (int id : ids) out.append(Piece(id));
  return out;
}

std::string_view Tokenizer::Piece(int id) const {
  const std::string_view bytes = bpe_.Bytes(id);
  if (!bytes.empty()) return bytes;
  const auto it = special_by_id_.find(id);
  return it == special_by_id_.end() ? std::string_view()
                                    : std::string_view(specials_[it->second].text);
}

}  // namespace waste
