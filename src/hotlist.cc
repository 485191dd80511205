#include "hotlist.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "platform/platform.h"

namespace waste {
namespace {

constexpr uint32_t kUsageMagic = 0x47535557;  // "WUSG"
constexpr uint32_t kUsageVersion = 1;

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

}  // namespace

Status WriteHotlist(const std::string& path, const ExpertCache& cache, uint64_t total_tokens) {
  std::vector<ExpertCache::SlotUsage> usage = cache.Usage();
  std::string out(16 + usage.size() * sizeof(UsageEntry), '\0');
  std::memcpy(out.data(), &kUsageMagic, 4);
  std::memcpy(out.data() + 4, &kUsageVersion, 4);
  std::memcpy(out.data() + 8, &total_tokens, 8);
  for (size_t i = 0; i < usage.size(); ++i) {
    UsageEntry e{static_cast<uint16_t>(usage[i].layer), static_cast<uint16_t>(usage[i].expert),
                 usage[i].hits, usage[i].last, 0};
    std::memcpy(out.data() + 16 + i * sizeof(UsageEntry), &e, sizeof(e));
  }
  return platform::WriteFileAtomic(path, out.data(), out.size());
}

int WarmFromHotlist(const std::string& path, const Container& container, ExpertCache& cache) {
  if (!platform::PathExists(path)) return 0;
  auto data = platform::ReadWholeFile(path);
  if (!data || data->size() < 16) return 0;
  uint32_t magic;
  std::memcpy(&magic, data->data(), 4);
  if (magic != kUsageMagic) return 0;
  size_t n = (data->size() - 16) / sizeof(UsageEntry);
  std::vector<UsageEntry> entries(n);
  if (n > 0) std::memcpy(entries.data(), data->data() + 16, n * sizeof(UsageEntry));
  std::stable_sort(entries.begin(), entries.end(), [](const UsageEntry& a, const UsageEntry& b) {
    if (a.hits != b.hits) return a.hits > b.hits;
    if (a.layer != b.layer) return a.layer < b.layer;
    return a.expert_id < b.expert_id;
  });
  const ModelConfig& cfg = container.config();
  int loaded = 0;
  for (const UsageEntry& e : entries) {
    if (e.layer >= cfg.n_layers || !container.is_moe_layer(e.layer) ||
        e.expert_id >= cfg.n_experts) {
      continue;
    }
    if (!cache.Preload(e.layer, e.expert_id, e.hits)) break;
    ++loaded;
  }
  return loaded;
}

}  // namespace waste
