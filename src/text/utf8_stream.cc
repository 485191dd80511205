// Utf8Stream (include/waste/text.h): holds back a UTF-8 character cut
// across pieces. See docs/TOKENIZER.md §4.
#include <utility>

#include "text/utf8.h"
#include "waste/text.h"

namespace waste {

std::string Utf8Stream::Push(std::string_view bytes) noexcept {
  std::string out = std::move(pending_);
  pending_.clear();
  out.append(bytes);
  const size_t tail = utf8::IncompleteTailLength(out);
  pending_.assign(out, out.size() - tail, tail);
  out.resize(out.size() - tail);
  return out;
}

std::string Utf8Stream::Flush() noexcept {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace waste
