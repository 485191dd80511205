// ThinkTagBudget (include/waste/grammar.h): the reasoning cap for models
// that think in text tags.
#include <exception>
#include <limits>
#include <utility>

#include "waste/engine.h"
#include "waste/grammar.h"

namespace waste {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

void KeepOnlyToken(std::span<float> logits, int token) noexcept {
  if (token < 0 || static_cast<size_t>(token) >= logits.size()) return;
  float keep = logits[static_cast<size_t>(token)];
  if (keep == -std::numeric_limits<float>::infinity()) keep = 0.0f;
  for (float& l : logits) l = -std::numeric_limits<float>::infinity();
  logits[static_cast<size_t>(token)] = keep;
}

ThinkTagBudget::ThinkTagBudget(int budget, std::string think_open, std::string think_close,
                               std::vector<int> close_ids, std::function<std::string(int)> piece,
                               TokenConstraint* inner)
    : budget_(budget),
      open_(std::move(think_open)),
      close_(std::move(think_close)),
      close_ids_(std::move(close_ids)),
      piece_(std::move(piece)),
      inner_(inner) {
  // Nothing to force with, or no tags: no cap.
  if (close_ids_.empty() || open_.empty() || close_.empty() || !piece_) state_ = State::kDone;
}

std::unique_ptr<ThinkTagBudget> ThinkTagBudget::ForTemplate(const Engine& engine,
                                                            const ChatTemplate& tmpl, int budget,
                                                            TokenConstraint* inner) noexcept try {
  if (tmpl.think_open.empty() || tmpl.think_close.empty()) return nullptr;
  const std::vector<PromptSegment> close = {{SegmentMode::kMarkup, tmpl.think_close},
                                            {SegmentMode::kPlain, "\n\n"}};
  Result<std::vector<int>> ids = engine.TokenizeSegments(close, /*add_bos=*/false);
  if (!ids || ids->empty()) return nullptr;
  return std::make_unique<ThinkTagBudget>(
      budget, tmpl.think_open, tmpl.think_close, std::move(*ids),
      [&engine](int id) { return engine.TokenPiece(id); }, inner);
} catch (const std::exception&) {
  return nullptr;
}

int ThinkTagBudget::Forced() const noexcept {
  if (state_ != State::kThinking) return -1;
  if (forced_ > 0) return close_ids_[forced_];
  return spent_ >= budget_ ? close_ids_[0] : -1;
}

bool ThinkTagBudget::Allows(int token) noexcept {
  const int forced = Forced();
  if (forced >= 0 && token != forced) return false;
  return inner_ == nullptr || inner_->Allows(token);
}

void ThinkTagBudget::Mask(std::span<float> logits) noexcept {
  if (inner_) inner_->Mask(logits);
  if (const int forced = Forced(); forced >= 0) KeepOnlyToken(logits, forced);
}

void ThinkTagBudget::Accept(int token) noexcept {
  if (inner_) inner_->Accept(token);
  if (state_ == State::kDone) return;
  if (forced_ > 0 || Forced() == token) {
    if (++forced_ == close_ids_.size()) state_ = State::kDone;
    return;
  }
  try {
    text_ += piece_(token);
  } catch (...) {
    state_ = State::kDone;  // out of memory: stop capping rather than guess
    return;
  }
  if (state_ == State::kStart) {
    // As the reply parser: whitespace, then the open tag (or its beginning).
    size_t i = 0;
    while (i < text_.size() && IsSpace(text_[i])) ++i;
    const std::string_view rest = std::string_view(text_).substr(i);
    if (rest.size() >= open_.size() && rest.substr(0, open_.size()) == open_) {
      state_ = State::kThinking;
      text_.erase(0, i + open_.size());  // what follows the tag is reasoning
    } else if (!(rest.empty() || std::string_view(open_).substr(0, rest.size()) == rest)) {
      state_ = State::kDone;  // the reply does not think
      return;
    } else {
      return;
    }
  } else {
    ++spent_;
  }
  // In the reasoning: the model closing it ends the cap; keep only the end
  // that may still begin the close tag.
  if (text_.find(close_) != std::string::npos) {
    state_ = State::kDone;
    return;
  }
  if (text_.size() >= close_.size()) text_.erase(0, text_.size() - (close_.size() - 1));
}

}  // namespace waste
