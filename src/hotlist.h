// The learned hotlist, usage.waste (FORMAT.md §9.5, ENGINE.md §5.8): which
// expert records were hot in a run, so the next open can pre-load them.
#pragma once

#include <cstdint>
#include <string>

#include "container.h"
#include "expert_cache.h"
#include "waste/status.h"

namespace waste {

// Rewrites `path` (atomically) with one entry per cached record.
Status WriteHotlist(const std::string& path, const ExpertCache& cache, uint64_t total_tokens);
// Pre-loads the hottest records of `path` (if it exists and its magic is
// right) until the cache is full; invalid entries are skipped. Returns the
// number of records loaded.
int WarmFromHotlist(const std::string& path, const Container& container, ExpertCache& cache);

}  // namespace waste
