// --image and chat's /image (docs/VISION.md): queue the files in order,
// write their media blocks, expand the prompt's pads. Kept apart from the
// command files so each command gains only a call or two.
#pragma once

#include <string>
#include <vector>

#include "options.h"
#include "waste/waste.h"

namespace waste::cli {

// Encodes and queues each file in order; stderr "[PATH: N image tokens]"
// per image unless -q. On failure prints "PATH: this container has no
// vision tower" or "PATH: <message>" and returns false (exit 1).
bool AttachImages(Engine& engine, const std::vector<std::string>& paths, const Options& options);

// One media block per file, "image WxH" from the header probe (without the
// size when the probe fails).
std::vector<std::string> MediaBlocksFor(const std::vector<std::string>& paths);

// An image a chat message showed, kept by its bytes: re-reading the
// conversation after a full context must show the model the same image,
// even if the file has changed or gone since.
struct HeldImage {
  std::string name;  // the path, for messages
  std::vector<uint8_t> bytes;
  ImageDimensions size;
  int rows = 0;  // image tokens it takes (Engine::ImageTokens, no encoding)
};

// Reads and probes each file; on failure prints "waste: <message naming
// the file>" and returns false.
bool HoldImages(const Engine& engine, const std::vector<std::string>& paths,
                std::vector<HeldImage>* held);
// Encodes and queues them in order (announced as AttachImages does when
// `announce`); false, with the message printed, on failure.
bool AttachHeldImages(Engine& engine, const std::vector<HeldImage>& held, bool announce);
std::vector<std::string> MediaBlocksFor(const std::vector<HeldImage>& held);

// Expands the queued images' pads in `ids` (no-op without queued images).
// On failure prints "<what>: <message>" and returns false.
bool ExpandImagePads(Engine& engine, std::vector<int>* ids, const std::string& what);

}  // namespace waste::cli
