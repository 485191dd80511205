// A container's tokenizer on its own, without the weights. Model::Open
// loads the trunk (gigabytes for a big model) before it can tokenize;
// this reads manifest.json and the tokenizer files only, in milliseconds:
// `waste tokenize` / `detokenize` use it, and so can a host that only counts
// or shows tokens. Its ids are the model's (the same files, the same
// checks as Model::Open).
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "waste/export.h"
#include "waste/status.h"

namespace waste {

class Tokenizer;

class WASTE_EXPORT ContainerTokenizer {
 public:
  // kUnsupported when the container has no tokenizer (no tokenizer.model or
  // tiktoken.model: its model takes token ids only); kFormat for a damaged
  // manifest or tokenizer, or ids beyond the model's vocab_size; kIo when a
  // file cannot be read.
  static Result<std::unique_ptr<ContainerTokenizer>> Open(const std::string& container_dir) noexcept;
  ~ContainerTokenizer();
  ContainerTokenizer(const ContainerTokenizer&) = delete;
  ContainerTokenizer& operator=(const ContainerTokenizer&) = delete;

  // As Model::Tokenize / Detokenize / TokenPiece.
  Result<std::vector<int>> Tokenize(std::string_view text, bool markup, bool add_bos) const noexcept;
  Result<std::string> Detokenize(std::span<const int> ids) const noexcept;
  std::string TokenPiece(int id) const noexcept;  // raw bytes, "" when unknown
  int vocab_size() const noexcept;                 // the model's: ids are 0..vocab_size()-1
  int bos_id() const noexcept;
  int eos_id() const noexcept;

 private:
  ContainerTokenizer(std::unique_ptr<Tokenizer> tokenizer, int vocab) noexcept;
  std::unique_ptr<Tokenizer> tokenizer_;
  int vocab_;
};

}  // namespace waste
