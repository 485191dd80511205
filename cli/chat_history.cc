#include "chat_history.h"

#include <span>

namespace waste::cli {

uint64_t ChatHistory::Tokens() const {
  uint64_t n = system_ids.size();
  for (const ChatTurn& t : turns) n += t.ids.size();
  return n;
}

size_t ChatHistory::DropOldestToFit(uint64_t incoming, uint64_t ctx) {
  uint64_t kept = Tokens() + incoming;
  size_t n = 0;
  while (!turns.empty() && kept > ctx) {
    kept -= turns.front().ids.size();
    turns.pop_front();
    ++n;
  }
  dropped += n;
  return n;
}

Status ChatHistory::ReRead(Engine& engine) const {
  engine.ResetState();
  engine.ClearImages();
  std::vector<int> batch = system_ids;
  auto read = [&]() -> Status {
    if (batch.empty()) return Status::Ok();
    Result<std::span<const float>> r = engine.Eval(batch);
    batch.clear();
    return r.has_value() ? Status::Ok() : r.error();
  };
  for (const ChatTurn& t : turns) {
    if (!t.images.empty()) {
      // Nothing read before this turn's images are queued (a pad the model
      // once wrote in an earlier reply would take their rows).
      if (Status s = read(); !s.ok()) return s;
      if (!AttachHeldImages(engine, t.images, /*announce=*/false)) {
        engine.ClearImages();
        return Status(Errc::kIo, "an image of a kept turn could not be encoded again");
      }
      batch = t.ids;
      if (Status s = read(); !s.ok()) return s;
      continue;
    }
    batch.insert(batch.end(), t.ids.begin(), t.ids.end());
  }
  return read();
}

}  // namespace waste::cli
