// --image and chat's /image (docs/VISION.md): queue the files in order,
// write their media blocks, expand the prompt's pads. Kept apart from the
// command files so each command gains only a call or two.
#pragma once

#include <string>
#include <vector>

#include "options.h"
#include "waste/waste.h"

namespace waste::cli {

// An image given with --image or /image, read once and kept by its bytes
// (chat's re-read after a full context must show the model the same image,
// even if the file has changed or gone since).
struct HeldImage {
  std::string name;  // the path, for messages
  std::vector<uint8_t> bytes;
  ImageDimensions size;
  int rows = 0;  // image tokens it takes (Engine::ImageTokens, no encoding)
};

// Reads and probes each file; on failure prints the reason naming the file
// ("PATH: this container has no vision tower", "waste: cannot read PATH:
// ...") and returns false (exit 1).
bool HoldImages(const Engine& engine, const std::vector<std::string>& paths,
                std::vector<HeldImage>* held);
// Encodes and queues them in order, "[PATH: N image tokens]" on stderr when
// `announce`; false, with the message printed, on failure.
bool AttachHeldImages(Engine& engine, const std::vector<HeldImage>& held, bool announce);
std::vector<std::string> MediaBlocksFor(const std::vector<HeldImage>& held);

// Expands the queued images' pads in `ids` (no-op without queued images).
// On failure prints "<what>: <message>" and returns false.
bool ExpandImagePads(Engine& engine, std::vector<int>* ids, const std::string& what);

}  // namespace waste::cli
