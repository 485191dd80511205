#include "streaming/hotlist.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "platform/platform.h"
#include "waste/files.h"

namespace waste {

Status WriteHotlist(const std::string& path, const ExpertCache& cache, uint64_t run_tokens) {
  std::map<std::pair<uint16_t, uint16_t>, HotlistEntry> merged;
  uint64_t total = run_tokens;
  if (platform::PathExists(path)) {
    auto data = platform::ReadRegularFile(path, kMaxHotlistBytes, "usage.waste");
    if (data) {
      auto old = ParseHotlist(*data);
      if (old) {
        total += old->total_tokens;
        for (const HotlistEntry& e : old->entries) {
          HotlistEntry& m = merged[{e.layer, e.expert}];
          if (e.hits >= m.hits) m = e;
        }
      }
    }
  }
  for (const ExpertCache::SlotUsage& u : cache.Usage()) {
    HotlistEntry e{static_cast<uint16_t>(u.layer), static_cast<uint16_t>(u.expert), u.hits, u.last};
    HotlistEntry& m = merged[{e.layer, e.expert}];
    if (e.hits >= m.hits) m = e;
  }
  std::vector<HotlistEntry> entries;
  entries.reserve(merged.size());
  for (const auto& kv : merged) entries.push_back(kv.second);
  std::sort(entries.begin(), entries.end(), HotterEntry);
  Hotlist h;
  h.total_tokens = total;
  h.entries = std::move(entries);
  std::string out = SerializeHotlist(h);
  // Only a hotlist is ever replaced: --usage pointing at a manifest, a
  // device or a symbolic link is refused, whatever else is there survives.
  return platform::ReplaceFile(path, out.data(), out.size(), "usage.waste",
                               std::string_view(out.data(), 4));
}

int WarmFromHotlist(const std::string& path, const Container& container, ExpertCache& cache) {
  if (!platform::PathExists(path)) return 0;
  auto data = platform::ReadRegularFile(path, kMaxHotlistBytes, "usage.waste");
  if (!data) return 0;
  auto hot = ParseHotlist(*data);
  if (!hot) return 0;  // a bad magic = ignore the file
  std::vector<HotlistEntry> entries = std::move(hot->entries);
  std::stable_sort(entries.begin(), entries.end(), HotterEntry);
  const ModelConfig& cfg = container.config();
  std::vector<ExpertCache::WarmEntry> warm;
  warm.reserve(std::min<size_t>(entries.size(), cache.slots()));
  for (const HotlistEntry& e : entries) {
    if (warm.size() >= cache.slots()) break;
    if (e.layer >= cfg.n_layers || !container.is_moe_layer(e.layer) ||
        e.expert >= container.bank(e.layer).experts) {
      continue;
    }
    warm.push_back({e.layer, e.expert, e.hits});
  }
  return cache.Warm(warm);
}

}  // namespace waste
