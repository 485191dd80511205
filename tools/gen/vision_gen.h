// waste-gen --vision: a K3-style vision tower and projector appended to a
// container (names without the text prefix, Q8G 2-D matrices, F32 norms,
// a Q8G 2-D position grid: the layout the engine reads) and vision.json.
#pragma once

#include <cstdint>
#include <string>

#include "writer/container_writer.h"
#include "waste/status.h"

namespace waste::gen {

struct VisionSpec {
  int hidden = 64;        // D
  int heads = 2;
  int qkv = 64;           // Q
  int inter = 128;        // I
  int blocks = 2;
  int pos_h = 8, pos_w = 8;
  int max_patches = 64;
  // Storage of the matrices and the position grid: "q8" (Q8G 2-D, the
  // reference's requantized layout), "q4" (Q4G 2-D), "f32" (F32 with the
  // patch kernel 4-D [D,3,14,14] and the grid 3-D [Ph,Pw,D], as a converter
  // may leave them).
  std::string format = "q8";
};

// "D,HEADS,Q,I,BLOCKS,POS_H,POS_W,MAX_PATCHES" (all > 0; Q % HEADS == 0,
// Q / HEADS even; MAX_PATCHES >= 4), optionally ",q8" / ",q4" / ",f32".
Result<VisionSpec> ParseVisionSpec(const std::string& text);

// Adds the tensors and vision.json; `pad_id` is the media pad token.
Status WriteVisionTower(ContainerWriter& w, const VisionSpec& spec, int text_hidden, int pad_id,
                        uint64_t seed);

}  // namespace waste::gen
