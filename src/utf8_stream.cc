#include "utf8_stream.h"

#include <utility>

#include "utf8.h"

namespace waste {

std::string Utf8Stream::Push(std::string_view bytes) {
  std::string out = std::move(pending_);
  pending_.clear();
  out.append(bytes);
  const size_t tail = utf8::IncompleteTailLength(out);
  pending_.assign(out, out.size() - tail, tail);
  out.resize(out.size() - tail);
  return out;
}

std::string Utf8Stream::Flush() {
  std::string out = std::move(pending_);
  pending_.clear();
  return out;
}

}  // namespace waste
