// usage.waste bytes (FORMAT.md §9.5): parsing and writing, no I/O, no
// cache; split out so the fuzz target can take it alone.
#include <algorithm>
#include <cstring>

#include "streaming/hotlist.h"

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

bool HotterEntry(const HotlistEntry& a, const HotlistEntry& b) { return Hotter(a, b); }

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

std::string SerializeHotlist(const Hotlist& h) {
  std::string out(kHeaderBytes + h.entries.size() * sizeof(UsageEntry), '\0');
  std::memcpy(out.data(), &kUsageMagic, 4);
  std::memcpy(out.data() + 4, &kUsageVersion, 4);
  std::memcpy(out.data() + 8, &h.total_tokens, 8);
  for (size_t i = 0; i < h.entries.size(); ++i) {
    const HotlistEntry& x = h.entries[i];
    UsageEntry e{x.layer, x.expert, x.hits, x.last_seen, 0};
    std::memcpy(out.data() + kHeaderBytes + i * sizeof(UsageEntry), &e, sizeof(e));
  }
  return out;
}

}  // namespace waste
