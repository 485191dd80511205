// vision.json: the tower's geometry and the pixel normalisation, read and
// bounds-checked only when vision is asked for (keys and bounds in
// docs/VISION.md). Keys we do not use are ignored.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "waste/status.h"

namespace waste::vision {

struct VisionConfig {
  int hidden = 1024;            // D (vt_hidden_size)
  int heads = 12;               // A
  int qkv = 1536;               // Q (qkv_hidden_size); head dim Q / A
  int inter = 4096;             // I (vt_intermediate_size)
  int blocks = 27;              // N (vt_num_hidden_layers)
  int pos_h = 64, pos_w = 64;   // stored position grid
  int text_hidden = 0;          // must equal the text model's hidden
  int patch = 14;               // must be 14
  int pad_id = -1;              // media_placeholder_token_id
  int max_patches = 1024;       // patch budget per image
  std::array<float, 3> mean{0.5f, 0.5f, 0.5f};
  std::array<float, 3> std{0.5f, 0.5f, 0.5f};

  int head_dim() const { return qkv / heads; }
  int merged() const { return 4 * hidden; }
};

// Fixed numerics, not read from the file.
inline constexpr float kTowerRmsEps = 1.1920928955078125e-07f;  // 2^-23
inline constexpr float kProjectorRmsEps = 1e-5f;
inline constexpr int kPatch = 14;
inline constexpr int kPatchValues = 3 * kPatch * kPatch;  // 588

// Parses the text of vision.json; defaults for absent keys (text_hidden
// defaults to `text_hidden`). Does not check bounds.
Result<VisionConfig> ParseVisionConfig(std::string_view json_text, int text_hidden);
// The load-time bounds; kFormat "vision.json geometry is unsupported or out
// of range: <which>".
Status ValidateVisionConfig(const VisionConfig& c, int text_hidden, int vocab);
// Reads <dir>/vision.json (absent = kFormat, as a tower without geometry
// is unusable), parses and validates it.
Result<VisionConfig> LoadVisionConfig(const std::string& dir, int text_hidden, int vocab);

}  // namespace waste::vision
