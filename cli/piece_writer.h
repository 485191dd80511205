// Generated pieces to a sink through the public text helpers
// (include/waste/text.h): a stop string split across tokens still matches
// and is never partly printed (ENGINE.md §7.4), then a UTF-8 character
// split across tokens is written whole (§9.5 W), so a terminal never shows
// half of one.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "waste/text.h"

namespace waste::cli {

class PieceWriter {
 public:
  using Sink = std::function<void(std::string_view)>;
  // `stop` empty = no stop string. The sink never gets an empty chunk.
  PieceWriter(std::string stop, Sink sink);
  // Several stop strings (--stop repeated): the output ends at whichever
  // comes first. The filters are chained, each passing on what it released.
  PieceWriter(const std::vector<std::string>& stops, Sink sink);

  // Appends a piece. Returns false once the stop string matched: the text
  // before it has been written, the rest dropped; further pushes are ignored.
  bool Push(std::string_view piece);
  // Writes whatever is still held (end of generation).
  void Finish();
  bool stopped() const { return stopped_; }

 private:
  void Emit(const std::string& bytes);

  std::vector<StopStringFilter> stops_;
  bool stopped_ = false;
  Utf8Stream utf8_;
  Sink sink_;
};

}  // namespace waste::cli
