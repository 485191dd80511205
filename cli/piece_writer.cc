#include "piece_writer.h"

#include <utility>

namespace waste::cli {

PieceWriter::PieceWriter(std::string stop, Sink sink) : sink_(std::move(sink)) {
  if (!stop.empty()) stops_.emplace_back(std::move(stop));
}

PieceWriter::PieceWriter(const std::vector<std::string>& stops, Sink sink)
    : sink_(std::move(sink)) {
  for (const std::string& s : stops) {
    if (!s.empty()) stops_.emplace_back(s);
  }
}

void PieceWriter::Emit(const std::string& bytes) {
  if (!bytes.empty()) sink_(bytes);
}

bool PieceWriter::Push(std::string_view piece) {
  if (stopped_) return false;
  std::string text(piece);
  for (StopStringFilter& f : stops_) {
    text = f.Push(text);
    if (f.stopped()) stopped_ = true;
  }
  Emit(utf8_.Push(text));
  if (stopped_) {
    Emit(utf8_.Flush());  // the text before the stop string, to its last byte
    return false;
  }
  return true;
}

void PieceWriter::Finish() {
  if (!stopped_) {
    // Each filter's held-back bytes go through the filters after it; a
    // match found that late still cuts the text.
    std::string text;
    for (StopStringFilter& f : stops_) {
      text = f.Push(text);
      if (f.stopped()) {
        stopped_ = true;
        break;
      }
      text += f.Finish();
    }
    Emit(utf8_.Push(text));
  }
  Emit(utf8_.Flush());
}

}  // namespace waste::cli
