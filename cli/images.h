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

// Expands the queued images' pads in `ids` (no-op without queued images).
// On failure prints "<what>: <message>" and returns false.
bool ExpandImagePads(Engine& engine, std::vector<int>* ids, const std::string& what);

}  // namespace waste::cli
