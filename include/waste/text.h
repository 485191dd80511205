// Text helpers for hosts that print generated text: the UTF-8 hold-back
// stream and the stop-string filter the `waste` CLI uses (ENGINE.md §7.4,
// §9.5). Neither needs an Engine. TokenEvent::piece stays raw bytes; these
// sit between the callback and the screen:
//
//   piece -> StopStringFilter::Push -> Utf8Stream::Push -> output
//   end   -> StopStringFilter::Finish -> Utf8Stream::Push, then Flush
//
// Not thread-safe; one of each per output stream. Only allocation failure
// can escape them (and then the process ends, as elsewhere in this API).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "waste/export.h"

namespace waste {

// Re-chunks a byte stream (decoded token pieces) so that every chunk it
// releases ends on a character boundary. A valid character cut across two
// pieces is held back (at most 3 bytes) until it completes; bytes that can
// never become valid pass through at once, so nothing is lost and the
// concatenation of all output equals the concatenation of all input.
class WASTE_EXPORT Utf8Stream {
 public:
  // Appends `bytes` and returns what can be printed now.
  std::string Push(std::string_view bytes) noexcept;

  // Returns whatever is held back (an incomplete character at the end of the
  // stream comes out as its raw bytes) and resets the stream.
  std::string Flush() noexcept;

  // Bytes currently held back (0..3).
  size_t pending() const noexcept { return pending_.size(); }

 private:
  std::string pending_;
};

// The --stop matcher (ENGINE.md §7.4). Decoded pieces go in; text safe to
// print comes out. Matching is on bytes (a special token's piece is its
// text, so markup stop strings work) and fires when the stop string spans
// several pieces. Bytes that might begin the stop string are held back until
// they are known not to, so no part of it is ever printed.
class WASTE_EXPORT StopStringFilter {
 public:
  // An empty stop string never fires: everything passes straight through.
  explicit StopStringFilter(std::string stop) noexcept;

  // Appends a piece and returns the bytes that can be printed now. Once the
  // stop string is seen, returns the text before it, sets stopped(), and
  // drops that piece's remainder and everything pushed afterwards. (A host
  // then cancels generation: return false from the token callback.)
  std::string Push(std::string_view piece) noexcept;

  // End of generation without a match: the held-back bytes.
  std::string Finish() noexcept;

  bool stopped() const noexcept { return stopped_; }
  const std::string& stop() const noexcept { return stop_; }

 private:
  // Length of the longest suffix of pending_ that is a proper prefix of stop_.
  size_t PartialMatchLength() const noexcept;

  std::string stop_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace waste
