// What `waste chat`'s session holds, turn by turn, so that a full context
// can drop the oldest turns and re-read the rest into a fresh state. A turn
// keeps the images its message showed (by their bytes): re-read without
// them, the media pads would read as the pad token's own embedding and the
// model would silently no longer see the image.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "images.h"
#include "waste/waste.h"

namespace waste::cli {

struct ChatTurn {
  std::vector<int> ids;            // the message (pads expanded) and the reply
  std::vector<HeldImage> images;   // the images its message showed, in order
  std::string text;                // the message as typed (/retry sends it again)
};

struct ChatHistory {
  std::vector<int> system_ids;
  std::deque<ChatTurn> turns;  // still in the context, oldest first
  size_t dropped = 0;          // oldest turns dropped so far

  // Tokens the system prompt and the kept turns take.
  uint64_t Tokens() const;
  // Drops the oldest turns until Tokens() + `incoming` fits `ctx` (or none
  // is left); returns how many it dropped.
  size_t DropOldestToFit(uint64_t incoming, uint64_t ctx);
  // A fresh state holding the system prompt and every kept turn, each turn
  // with its images queued for the call that reads it. Turns without images
  // are read together; a turn with images is a call of its own (its pads
  // take its rows, and nothing before it can take them). On failure the
  // state holds only part of it (the caller must re-read again).
  Status ReRead(Engine& engine) const;
};

}  // namespace waste::cli
