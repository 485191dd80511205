// waste/tokenizer.h, and the one place that loads a container's tokenizer
// against its manifest (Model::Open calls LoadModelTokenizer too).
#include "waste/tokenizer.h"

#include <fmt/format.h>

#include <exception>

#include "container/container.h"
#include "engine/container_tokenizer_internal.h"
#include "platform/platform.h"
#include "text/tokenizer.h"
#include "waste/files.h"

namespace waste {

Result<std::unique_ptr<Tokenizer>> LoadModelTokenizer(const std::string& dir,
                                                      const ModelConfig& cfg) {
  Result<Tokenizer> tok = Tokenizer::Load(dir);
  if (!tok) {
    if (tok.error().code() == Errc::kUnsupported) return std::unique_ptr<Tokenizer>();
    return tok.error();
  }
  // Every rank and special id must be a row of the embedding: refused at
  // open rather than when a prompt first hits one.
  if (tok->vocab_size() > cfg.vocab) {
    return FormatError(fmt::format(
        "{}: the tokenizer uses ids up to {} but the model's vocab_size is {} (tokenizer.model "
        "ranks and specials.json ids must be below it)",
        dir, tok->vocab_size() - 1, cfg.vocab));
  }
  auto t = std::make_unique<Tokenizer>(std::move(*tok));
  if (cfg.eos_token_id > 0) t->set_eos_id(cfg.eos_token_id);
  return t;
}

ContainerTokenizer::ContainerTokenizer(std::unique_ptr<Tokenizer> tokenizer, int vocab) noexcept
    : tokenizer_(std::move(tokenizer)), vocab_(vocab) {}
ContainerTokenizer::~ContainerTokenizer() = default;

Result<std::unique_ptr<ContainerTokenizer>> ContainerTokenizer::Open(
    const std::string& container_dir) noexcept {
  try {
    const std::string dir = container_dir.empty() ? "." : container_dir;
    const std::string path = dir + "/manifest.json";
    WASTE_ASSIGN_OR_RETURN(std::string text,
                           platform::ReadRegularFile(path, kMaxManifestBytes, "manifest"));
    WASTE_ASSIGN_OR_RETURN(Manifest m, ParseManifestConfig(text, path));
    WASTE_ASSIGN_OR_RETURN(std::unique_ptr<Tokenizer> tok, LoadModelTokenizer(dir, m.config));
    if (!tok) {
      return UnsupportedError(dir + " has no tokenizer (no tokenizer.model or tiktoken.model): "
                                    "its model takes token ids only");
    }
    return std::unique_ptr<ContainerTokenizer>(
        new ContainerTokenizer(std::move(tok), m.config.vocab));
  } catch (const std::bad_alloc&) {
    return OomError("allocation failed while loading the tokenizer of " + container_dir);
  } catch (const std::exception& e) {
    return FormatError(e.what());
  }
}

Result<std::vector<int>> ContainerTokenizer::Tokenize(std::string_view text, bool markup,
                                                      bool add_bos) const noexcept {
  try {
    std::vector<int> ids;
    if (add_bos) ids.push_back(tokenizer_->bos_id());
    tokenizer_->EncodeTo(text, markup, &ids);
    return ids;
  } catch (const std::exception& e) {
    return OomError(e.what());
  }
}

Result<std::string> ContainerTokenizer::Detokenize(std::span<const int> ids) const noexcept {
  for (int id : ids) {  // as Model::Detokenize
    if (id < 0 || id >= vocab_) {
      return ArgError(fmt::format("token id {} is outside the vocabulary (0..{})", id, vocab_ - 1));
    }
  }
  try {
    return tokenizer_->Decode(ids);
  } catch (const std::exception& e) {
    return OomError(e.what());
  }
}

std::string ContainerTokenizer::TokenPiece(int id) const noexcept {
  try {
    return std::string(tokenizer_->Piece(id));
  } catch (...) {
    return {};
  }
}

int ContainerTokenizer::vocab_size() const noexcept { return vocab_; }
int ContainerTokenizer::bos_id() const noexcept { return tokenizer_->bos_id(); }
int ContainerTokenizer::eos_id() const noexcept { return tokenizer_->eos_id(); }

}  // namespace waste
