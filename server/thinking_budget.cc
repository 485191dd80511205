#include "thinking_budget.h"

#include <utility>

namespace waste::server {

ThinkingBudget::ThinkingBudget(int budget, std::vector<int> close_ids, XtmlMarkers markers,
                               TokenConstraint* inner)
    : budget_(budget), close_ids_(std::move(close_ids)), markers_(markers), inner_(inner) {
  if (close_ids_.empty()) done_ = true;  // nothing to force with: no cap
}

int ThinkingBudget::Forced() const noexcept {
  if (done_) return -1;
  if (forced_ > 0) return close_ids_[forced_];
  if (spent_ < budget_ || depth_ > 0 || in_tag_) return -1;
  return close_ids_[0];
}

bool ThinkingBudget::Allows(int token) noexcept {
  int forced = Forced();
  if (forced >= 0 && token != forced) return false;
  return inner_ == nullptr || inner_->Allows(token);
}

void ThinkingBudget::Mask(std::span<float> logits) noexcept {
  if (inner_) inner_->Mask(logits);
  // Only the forced token stays. When the other constraint forbade it too
  // (a grammar that cannot close the channel here), the budget wins: its
  // markup is what every reply grammar accepts after a think channel.
  if (const int forced = Forced(); forced >= 0) KeepOnlyToken(logits, forced);
}

void ThinkingBudget::Accept(int token) noexcept {
  if (inner_) inner_->Accept(token);
  if (done_) return;
  if (forced_ > 0 || (Forced() >= 0 && token == close_ids_[0])) {
    if (++forced_ == close_ids_.size()) done_ = true;
    return;
  }
  ++spent_;
  if (token == markers_.open) {
    ++depth_;
    in_tag_ = true;
  } else if (token == markers_.close) {
    // A close at the channel's own level ends it: the model closed <think>.
    if (depth_ == 0) done_ = true;
    else --depth_;
    in_tag_ = true;
  } else if (token == markers_.sep) {
    in_tag_ = false;
  }
}

}  // namespace waste::server
