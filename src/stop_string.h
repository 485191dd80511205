// StopStringFilter: the CLI's --stop matcher (ENGINE.md §7.4). Decoded
// pieces go in; text safe to print comes out. Matching is on bytes (a
// special token's piece is its text, so markup stop strings work) and fires
// when the stop string spans several pieces. Bytes that might begin the
// stop string are held back until they are known not to, so no part of it
// is ever printed. Not thread-safe; one per generation.
#pragma once

#include <string>
#include <string_view>

namespace waste {

class StopStringFilter {
 public:
  // An empty stop string never fires: everything passes straight through.
  explicit StopStringFilter(std::string stop);

  // Appends a piece and returns the bytes that can be printed now. Once the
  // stop string is seen, returns the text before it, sets stopped(), and
  // drops that piece's remainder and everything pushed afterwards.
  std::string Push(std::string_view piece);

  // End of generation without a match: the held-back bytes.
  std::string Finish();

  bool stopped() const { return stopped_; }

 private:
  // Length of the longest suffix of pending_ that is a proper prefix of stop_.
  size_t PartialMatchLength() const;

  std::string stop_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace waste
