#include "reasoning_style.h"

#include <algorithm>
#include <cstdlib>
#include <utility>

namespace waste::cli {
namespace {

// The length of the longest suffix of `s` that is a proper prefix of `tag`.
size_t PartialTagAtEnd(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n) {
    if (s.substr(s.size() - n) == tag.substr(0, n)) return n;
  }
  return 0;
}

}  // namespace

ReasoningStyle::ReasoningStyle(std::string open, std::string close, TextSink text, FaintSink faint)
    : open_(std::move(open)),
      close_(std::move(close)),
      text_(std::move(text)),
      faint_(std::move(faint)) {
  if (open_.empty() || close_.empty()) state_ = State::kAnswer;
}

bool ReasoningStyle::TakeTag(const std::string& tag) {
  const size_t at = held_.find(tag);
  if (at != std::string::npos) {
    if (at > 0) text_(std::string_view(held_).substr(0, at));
    held_.erase(0, at + tag.size());
    return true;
  }
  const size_t keep = PartialTagAtEnd(held_, tag);
  if (held_.size() > keep) text_(std::string_view(held_).substr(0, held_.size() - keep));
  held_.erase(0, held_.size() - keep);
  return false;
}

void ReasoningStyle::Push(std::string_view bytes) {
  if (state_ == State::kAnswer) {
    if (!bytes.empty()) text_(bytes);
    return;
  }
  held_.append(bytes);
  if (state_ == State::kStart) {
    // Only whitespace may come before the opening tag.
    const size_t lead = held_.find_first_not_of(" \t\r\n");
    if (lead == std::string::npos) return;
    const std::string_view rest = std::string_view(held_).substr(lead);
    if (rest.size() < open_.size() && open_.compare(0, rest.size(), rest) == 0)
      return;  // may still be it
    if (rest.substr(0, open_.size()) != open_) {
      state_ = State::kAnswer;  // no reasoning block: everything as it is
      text_(held_);
      held_.clear();
      return;
    }
    if (lead > 0) text_(std::string_view(held_).substr(0, lead));
    held_.erase(0, lead + open_.size());
    state_ = State::kThinking;
    faint_(true);
  }
  if (state_ == State::kThinking && TakeTag(close_)) {
    faint_(false);
    state_ = State::kAnswer;
    if (!held_.empty()) text_(held_);
    held_.clear();
  }
}

void ReasoningStyle::Finish() {
  if (!held_.empty()) text_(held_);
  held_.clear();
  if (state_ == State::kThinking) faint_(false);
  state_ = State::kAnswer;
}

ReasoningStyle TerminalReasoningStyle(const ChatTemplate* tmpl, bool terminal,
                                      ReasoningStyle::TextSink text,
                                      ReasoningStyle::TextSink codes) {
  const char* no_color = std::getenv("NO_COLOR");
  const bool styled = terminal && tmpl != nullptr && (no_color == nullptr || *no_color == '\0');
  return ReasoningStyle(
      styled ? tmpl->think_open : "", styled ? tmpl->think_close : "", std::move(text),
      [codes = std::move(codes)](bool on) { codes(on ? "\x1b[2m" : "\x1b[22m"); });
}

}  // namespace waste::cli
