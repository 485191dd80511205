// The learned hotlist, usage.waste (FORMAT.md §9.5, ENGINE.md §5.8): which
// expert records were hot in a run, so the next open can pre-load them.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "container/container.h"
#include "streaming/expert_cache.h"
#include "waste/status.h"

namespace waste {

struct HotlistEntry {
  uint16_t layer = 0;
  uint16_t expert = 0;
  uint32_t hits = 0;
  uint32_t last_seen = 0;
};

struct Hotlist {
  uint64_t total_tokens = 0;
  std::vector<HotlistEntry> entries;  // file order
};

// Parses usage.waste bytes; nullopt-like error when the magic is wrong or
// the header is cut. Entries past the last whole one are ignored.
Result<Hotlist> ParseHotlist(std::string_view bytes);
// The file's bytes for `h` (entries in the order given).
std::string SerializeHotlist(const Hotlist& h);
// Hits descending, then (layer, expert) ascending (FORMAT.md §9.5).
bool HotterEntry(const HotlistEntry& a, const HotlistEntry& b);

// Writes `path` (atomically) with this run's usage merged into what the
// file already holds: one entry per (layer, expert) seen in either, the
// larger hit count winning (a warmed slot already carries the old count
// plus this run's), sorted hottest first; total_tokens accumulates.
Status WriteHotlist(const std::string& path, const ExpertCache& cache, uint64_t run_tokens);

// Starts loading the hottest records of `path` (if it exists and its magic
// is right) into the cache's empty slots, through the reader threads (the
// opening thread does not wait). Invalid entries are skipped; a damaged
// record is simply not warmed. Returns the number of reads started.
int WarmFromHotlist(const std::string& path, const Container& container, ExpertCache& cache);

}  // namespace waste
