// Tokenizer: text <-> token ids for Kimi-family containers (ENGINE.md §9).
// Pre-tokenization with the upstream pattern (PreTokenizer), tiktoken BPE
// over tokenizer.model (BytePairEncoder), and the container's special
// (markup) strings from specials.json. Plain mode never emits a special id;
// markup mode turns special strings into their ids. Immutable after Load
// except for set_eos_id; const methods are safe for concurrent use.
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "text/bpe.h"
#include "text/pretokenizer.h"
#include "text/tokenizer_files.h"
#include "waste/status.h"

namespace waste {

class Tokenizer {
 public:
  // Reads <dir>/tokenizer.model (else <dir>/tiktoken.model) and, when
  // present, <dir>/specials.json and <dir>/pretokenizer.json (its Split
  // rules replace the Kimi pattern; its bos_id the positional BOS).
  // kUnsupported when neither rank file exists; kFormat for malformed
  // content; kIo when a file cannot be read.
  static Result<Tokenizer> Load(const std::string& container_dir);
  // The same from parsed parts (tests, tools). `rules` null: Kimi's pattern.
  static Result<Tokenizer> FromParts(std::vector<RankedToken> ranks,
                                     std::vector<SpecialToken> specials,
                                     const PreTokenizerFile* rules = nullptr,
                                     std::string_view rules_name = "pretokenizer.json");

  // Token ids of `text`. markup=false: every byte goes through
  // pre-tokenization + BPE, so text that looks like a control token stays
  // ordinary text. markup=true: special strings (earliest first, longest at
  // the same offset) become their ids and the text between them is encoded
  // as plain. Never prepends BOS.
  std::vector<int> Encode(std::string_view text, bool markup) const;
  // The same, appending to `out`.
  void EncodeTo(std::string_view text, bool markup, std::vector<int>* out) const;

  // Concatenated pieces: byte-exact, no UTF-8 validation. Unknown ids add
  // nothing.
  std::string Decode(std::span<const int> ids) const;
  // The bytes of one id: a special's text, a rank's bytes, else empty.
  std::string_view Piece(int id) const;

  // BOS = pretokenizer.json's bos_id, else the number of rank lines; EOS = BOS + 2 unless set_eos_id overrode it
  // (the manifest's eos_token_id when > 0).
  int bos_id() const { return bos_id_; }
  int eos_id() const { return eos_id_; }
  void set_eos_id(int id) { eos_id_ = id; }
  // One past the highest id (rank or special).
  int vocab_size() const { return vocab_size_; }
  bool IsSpecial(int id) const { return special_by_id_.count(id) != 0; }
  const std::vector<SpecialToken>& specials() const { return specials_; }

 private:
  Tokenizer(BytePairEncoder bpe, std::vector<SpecialToken> specials,
            const PreTokenizer* pretokenizer);
  void EncodePlain(std::string_view text, std::vector<int>* out) const;
  // Earliest special at or after `from` (longest at one offset): its index
  // in specials_, or -1; `*at` is its offset.
  int FindSpecial(std::string_view text, size_t from, size_t* at) const;

  BytePairEncoder bpe_;
  std::vector<SpecialToken> specials_;
  std::unordered_map<int, size_t> special_by_id_;
  // Special indices by first byte, longest text first.
  std::array<std::vector<uint32_t>, 256> special_by_first_byte_;
  const PreTokenizer* pretokenizer_ = nullptr;
  std::shared_ptr<const PreTokenizer> own_pretokenizer_;  // set with Split rules
  int bos_id_ = 0;
  int eos_id_ = 0;
  int vocab_size_ = 0;
};

}  // namespace waste
