#include "text_stream.h"

#include <utility>

namespace waste::cli {

size_t IncompleteUtf8Tail(std::string_view text) {
  // Walk back over at most 3 continuation bytes to the lead byte.
  size_t n = text.size();
  size_t back = 0;
  while (back < 3 && back < n && (static_cast<unsigned char>(text[n - 1 - back]) & 0xC0) == 0x80) {
    ++back;
  }
  if (back == n) return 0;  // only continuation bytes: nothing to wait for
  unsigned char lead = static_cast<unsigned char>(text[n - 1 - back]);
  size_t need;
  if (lead >= 0xC2 && lead <= 0xDF) {
    need = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    need = 3;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    need = 4;
  } else {
    return 0;  // ASCII or an invalid lead: complete as far as we can tell
  }
  size_t have = back + 1;
  return have < need ? have : 0;
}

TextStream::TextStream(std::string stop, Sink sink)
    : stop_(std::move(stop)), sink_(std::move(sink)) {}

bool TextStream::Push(std::string_view piece) {
  if (stopped_) return false;
  pending_.append(piece);
  if (!stop_.empty()) {
    size_t at = pending_.find(stop_);
    if (at != std::string::npos) {
      if (at > 0) sink_(std::string_view(pending_).substr(0, at));
      pending_.clear();
      stopped_ = true;
      return false;
    }
  }
  // Hold back what could still become the stop string (§7.4 keeps the last
  // strlen(stop) bytes), then an unfinished character before that point.
  size_t keep = stop_.size() < pending_.size() ? stop_.size() : pending_.size();
  size_t flush = pending_.size() - keep;
  flush -= IncompleteUtf8Tail(std::string_view(pending_).substr(0, flush));
  if (flush > 0) {
    sink_(std::string_view(pending_).substr(0, flush));
    pending_.erase(0, flush);
  }
  return true;
}

void TextStream::Finish() {
  if (!pending_.empty() && !stopped_) sink_(pending_);
  pending_.clear();
}

}  // namespace waste::cli
