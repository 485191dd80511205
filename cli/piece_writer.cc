#include "piece_writer.h"

#include <utility>

namespace waste::cli {

PieceWriter::PieceWriter(std::string stop, Sink sink)
    : stop_(std::move(stop)), sink_(std::move(sink)) {}

void PieceWriter::Emit(const std::string& bytes) {
  if (!bytes.empty()) sink_(bytes);
}

bool PieceWriter::Push(std::string_view piece) {
  if (stop_.stopped()) return false;
  Emit(utf8_.Push(stop_.Push(piece)));
  if (stop_.stopped()) {
    Emit(utf8_.Flush());  // the text before the stop string, to its last byte
    return false;
  }
  return true;
}

void PieceWriter::Finish() {
  Emit(utf8_.Push(stop_.Finish()));
  Emit(utf8_.Flush());
}

}  // namespace waste::cli
