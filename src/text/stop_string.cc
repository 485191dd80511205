// StopStringFilter (include/waste/text.h): the §7.4 byte-level stop-string
// matcher. See docs/TOKENIZER.md §5.
#include <algorithm>
#include <utility>

#include "waste/text.h"

namespace waste {

StopStringFilter::StopStringFilter(std::string stop) noexcept : stop_(std::move(stop)) {}

std::string StopStringFilter::Push(std::string_view piece) noexcept {
  if (stopped_) return {};
  if (stop_.empty()) return std::string(piece);
  pending_.append(piece);
  if (const size_t at = pending_.find(stop_); at != std::string::npos) {
    stopped_ = true;
    std::string out = pending_.substr(0, at);
    pending_.clear();
    return out;
  }
  // Everything except a tail that could still grow into the stop string.
  // (R holds back strlen(stop) bytes; this releases the same bytes sooner.)
  const size_t keep = PartialMatchLength();
  std::string out = pending_.substr(0, pending_.size() - keep);
  pending_.erase(0, pending_.size() - keep);
  return out;
}

std::string StopStringFilter::Finish() noexcept {
  std::string out = std::move(pending_);
  pending_.clear();
  return stopped_ ? std::string() : out;
}

size_t StopStringFilter::PartialMatchLength() const noexcept {
  const size_t max = std::min(pending_.size(), stop_.size() - 1);
  for (size_t len = max; len > 0; --len) {
    if (std::string_view(pending_).substr(pending_.size() - len) ==
        std::string_view(stop_).substr(0, len)) {
      return len;
    }
  }
  return 0;
}

}  // namespace waste
