// Streams generated pieces to a sink with the two hold-backs the CLI needs:
// a stop string split across tokens must still match and never be partly
// printed (ENGINE.md §7.4), and a UTF-8 character split across tokens is
// written whole (§9.5 W) so a terminal never shows half of one.
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace waste::cli {

// Bytes at the end of `text` that start a UTF-8 sequence not yet complete
// (0..3). Invalid bytes are not held: they can never become valid.
size_t IncompleteUtf8Tail(std::string_view text);

class TextStream {
 public:
  using Sink = std::function<void(std::string_view)>;
  // `stop` empty = no stop string.
  TextStream(std::string stop, Sink sink);

  // Appends a piece. Returns false once the stop string matched: the text
  // before it has been written, the rest dropped; further pushes are ignored.
  bool Push(std::string_view piece);
  // Writes whatever is still held (end of generation).
  void Finish();
  bool stopped() const { return stopped_; }

 private:
  std::string stop_;
  Sink sink_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace waste::cli
