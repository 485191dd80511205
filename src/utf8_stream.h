// Utf8Stream: re-chunks a byte stream (decoded token pieces) so that every
// chunk it releases ends on a character boundary. A valid character cut
// across two pieces is held back (at most 3 bytes) until it completes; bytes
// that can never become valid pass through at once, so nothing is lost and
// the concatenation of all output equals the concatenation of all input.
// Not thread-safe; one per output stream. See docs/TOKENIZER.md.
#pragma once

#include <string>
#include <string_view>

namespace waste {

class Utf8Stream {
 public:
  // Appends `bytes` and returns what can be printed now.
  std::string Push(std::string_view bytes);

  // Returns whatever is held back (an incomplete character at the end of the
  // stream comes out as its raw bytes) and resets the stream.
  std::string Flush();

  // Bytes currently held back (0..3).
  size_t pending() const { return pending_.size(); }

 private:
  std::string pending_;
};

}  // namespace waste
