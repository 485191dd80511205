// Internal side of include/waste/chat.h: turning a segment list into ids
// with the engine's Tokenizer (Engine::TokenizeSegments is the public form).
#pragma once

#include <span>
#include <vector>

#include "text/tokenizer.h"
#include "waste/chat.h"

namespace waste {

// Appends the ids of `segments` to `ids`, each segment encoded on its own in
// its own mode (never concatenated first, never merged with a neighbour).
inline void AppendSegmentTokens(const Tokenizer& tokenizer, std::span<const PromptSegment> segments,
                                std::vector<int>* ids) {
  for (const PromptSegment& s : segments) {
    tokenizer.EncodeTo(s.text, s.mode == SegmentMode::kMarkup, ids);
  }
}

inline std::vector<int> TokenizeSegments(const Tokenizer& tokenizer,
                                         std::span<const PromptSegment> segments) {
  std::vector<int> ids;
  AppendSegmentTokens(tokenizer, segments, &ids);
  return ids;
}

}  // namespace waste
