// What run, chat and bench share around Engine::Generate: sampler settings
// from the options and the per-token tallies behind the stats line
// (decode-only time, summed per-token hit/miss counters; ENGINE.md §1.6).
#pragma once

#include <cstdint>

#include "options.h"
#include "waste/engine.h"

namespace waste::cli {

GenParams ParamsFromOptions(const Options& options);

struct TokenTally {
  uint64_t tokens = 0;  // callbacks received, including one a stop string ended in
  double ms = 0;        // sum of per-token step times
  uint64_t hit = 0;
  uint64_t miss = 0;
  uint64_t bytes = 0;

  void Add(const TokenEvent& e) {
    ++tokens;
    ms += e.ms_total;
    hit += e.experts_hit;
    miss += e.experts_missed;
    bytes += e.bytes_read;
  }
};

}  // namespace waste::cli
