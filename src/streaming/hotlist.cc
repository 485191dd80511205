#include "streaming/hotlist.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "platform/platform.h"

namespace waste {
namespace {

constexpr uint32_t kUsageMagic = 0x47535557;  // "WUSG"
constexpr uint32_t kUsageVersion = 1;
constexpr size_t kHeaderBytes = 16;

#pragma pack(push, 1)
struct UsageEntry {
  uint16_t layer;
  uint16_t expert_id;
  uint32_t hits;
  uint32_t last_seen;
  uint32_t next_layer_top;
};
#pragma pack(pop)
static_assert(sizeof(UsageEntry) == 16, "usage entry is 16 bytes");

// Hits descending, then (layer, expert) ascending (FORMAT.md §9.5).
bool Hotter(const HotlistEntry& a, const HotlistEntry& b) {
  if (a.hits != b.hits) return a.hits > b.hits;
  if (a.layer != b.layer) return a.layer < b.layer;
  return a.expert < b.expert;
}

}  // namespace

Result<Hotlist> ParseHotlist(std::string_view bytes) {
  if (bytes.size() < kHeaderBytes) return FormatError("usage.waste: shorter than its header");
  uint32_t magic;
  std::memcpy(&magic, bytes.data(), 4);
  if (magic != kUsageMagic) return FormatError("usage.waste: bad magic");
  Hotlist h;
  std::memcpy(&h.total_tokens, bytes.data() + 8, 8);
  size_t n = (bytes.size() - kHeaderBytes) / sizeof(UsageEntry);
  h.entries.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    UsageEntry e;
    std::memcpy(&e, bytes.data() + kHeaderBytes + i * sizeof(UsageEntry), sizeof(e));
    h.entries.push_back({e.layer, e.expert_id, e.hits, e.last_seen});
  }
  return h;
}

Status WriteHotlist(const std::string& path, const ExpertCache& cache, uint64_t run_tokens) {
  std::map<std::pair<uint16_t, uint16_t>, HotlistEntry> merged;
  uint64_t total = run_tokens;
  if (platform::PathExists(path)) {
    auto data = platform::ReadWholeFile(path);
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
  std::sort(entries.begin(), entries.end(), Hotter);

  std::string out(kHeaderBytes + entries.size() * sizeof(UsageEntry), '\0');
  std::memcpy(out.data(), &kUsageMagic, 4);
  std::memcpy(out.data() + 4, &kUsageVersion, 4);
  std::memcpy(out.data() + 8, &total, 8);
  for (size_t i = 0; i < entries.size(); ++i) {
    UsageEntry e{entries[i].layer, entries[i].expert, entries[i].hits, entries[i].last_seen, 0};
    std::memcpy(out.data() + kHeaderBytes + i * sizeof(UsageEntry), &e, sizeof(e));
  }
  return platform::WriteFileAtomic(path, out.data(), out.size());
}

int WarmFromHotlist(const std::string& path, const Container& container, ExpertCache& cache) {
  if (!platform::PathExists(path)) return 0;
  auto data = platform::ReadWholeFile(path);
  if (!data) return 0;
  auto hot = ParseHotlist(*data);
  if (!hot) return 0;  // a bad magic = ignore the file
  std::vector<HotlistEntry> entries = std::move(hot->entries);
  std::stable_sort(entries.begin(), entries.end(), Hotter);
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
