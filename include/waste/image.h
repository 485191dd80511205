// Images for models with a vision tower (Kimi K3): the header probe, which
// needs no model, and reading a file's bytes. The per-model calls (attach
// an image to the next prompt, expand the prompt's media pads, drop the
// queue) are members of Model (waste/model.h) and Engine (waste/engine.h).
// docs/VISION.md has the whole picture.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "waste/export.h"
#include "waste/status.h"

namespace waste {

struct ImageDimensions {
  int width = 0;
  int height = 0;
};

// Stored width and height from the file's header (no decode). kIo when the
// file is unreadable, not an accepted image, or over the pixel limit.
WASTE_EXPORT Result<ImageDimensions> ProbeImageFile(const std::string& path) noexcept;
// The same for bytes in memory (e.g. a data: URL); `name` is used in
// messages.
WASTE_EXPORT Result<ImageDimensions> ProbeImageBytes(std::span<const uint8_t> bytes,
                                        std::string_view name) noexcept;

// A file's bytes for AddImageBytes, read whole; kIo naming the file when it
// cannot be read or is larger than any accepted image. A host that must
// show the same image again later (chat re-reading its conversation after
// a full context) keeps these instead of the path, which may change.
WASTE_EXPORT Result<std::vector<uint8_t>> ReadImageFile(const std::string& path) noexcept;

// Images waiting in one context for the prompt that shows them.
inline constexpr int kMaxQueuedImages = 32;

}  // namespace waste
