// The synthetic container generator behind `waste-gen`: a preset's shapes,
// deterministic values from a seed (random codebooks and indices written
// directly, no k-means), optional tokenizer, router biases fitted to a
// routing trace. Everything goes through ContainerWriter.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "container/container.h"
#include "waste/status.h"

namespace waste::gen {

struct GenOptions {
  std::string out_dir;
  std::string preset = "tiny";
  uint64_t seed = 0;
  bool tokenizer = false;            // tokenizer.model, specials.json, chat.json
  bool vq4p = false;                 // 4 stages x 64 entries, 6-bit packed indices
  // Routing trace for the router biases: "" = the built-in default path for
  // presets with skewed routing (skipped if missing), "none" = never.
  std::string trace;
  bool manifest_only = false;        // dry run: manifest.json alone, exact offsets
  // --vision D,HEADS,Q,I,BLOCKS,POS_H,POS_W,MAX_PATCHES: add a vision tower
  // of that shape (replaces the preset's placeholder tensor outside the
  // prefix) and vision.json. Empty = none.
  std::string vision;
  // --override JSON: a merge patch applied to the preset's config (e.g.
  // grouped routing on deepseek-v3-tiny). Empty = none.
  std::string override_json;
  std::function<void(const std::string&)> log;  // progress lines; may be empty
};

struct GenReport {
  ParamCounts params;
  uint64_t bytes = 0;                // every file written (or planned, dry run)
  std::string routing;               // how the router biases were made
};

Result<GenReport> Generate(const GenOptions& options);

// Where the default routing trace is looked for (set at build time).
const char* DefaultTracePath();

}  // namespace waste::gen
