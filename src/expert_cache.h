// The bounded expert cache (ENGINE.md §5): equal slots sized from the
// largest record, LFRU replacement with sampled eviction (or LRU), pinned
// records never evicted, hits never re-read. A miss is one positioned read
// of the whole record through the container's bank file (cache-bypass when
// the filesystem allows), validated by Container::ParseRecord before use.
// Cache contents only change timing: logits never depend on them.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "container.h"
#include "platform/platform.h"
#include "waste/config.h"
#include "waste/status.h"

namespace waste {

struct ExpertRef {
  ExpertRecordView view;
  int slot = -1;
};

struct ExpertCacheCounters {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t bytes_read = 0;
  uint64_t evictions = 0;
  double read_seconds = 0;   // time blocked on reads
};

class ExpertCache {
 public:
  // `slots` >= 2 * top_k (the plan's minimum cache).
  static Result<std::unique_ptr<ExpertCache>> Create(const Container& container, uint64_t slots,
                                                     CachePolicy policy, bool verify_crc);

  // Returns the record pinned until Release(ref.slot). Errors read
  // "expert E of layer L: <reason>".
  Result<ExpertRef> Acquire(int layer, int expert);
  void Release(int slot);

  // A layer has routed: these records will be Acquired next, in this order.
  // An asynchronous cache starts their reads now; results never change.
  void Hint(int layer, std::span<const int> experts);
  // Router lookahead's guess for the next MoE layer: speculative reads,
  // unpinned, not counted as misses (bytes are counted).
  void Prefetch(int layer, std::span<const int> experts);

  // Loads (layer, expert) without pinning or counting it as a demand access
  // (hotlist warm-up). Returns false when the cache is full.
  bool Preload(int layer, int expert, uint32_t hits);

  uint64_t slots() const { return slot_count_; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  uint64_t allocated_bytes() const { return slot_count_ * slot_bytes_; }
  ExpertCacheCounters counters() const;

  struct SlotUsage {
    int layer, expert;
    uint32_t hits, last;
  };
  std::vector<SlotUsage> Usage() const;   // finished records, slot order
  uint64_t clock() const { return clock_; }

 private:
  ExpertCache(const Container& c, uint64_t slots, uint64_t slot_bytes, CachePolicy policy,
              bool verify);
  int FindVictim();
  Status ReadInto(int slot, int layer, int expert);

  struct Slot {
    uint8_t* data = nullptr;
    int layer = -1, expert = -1;
    uint32_t hits = 0;
    uint64_t last = 0;
    int pins = 0;
    ExpertRecordView view;
  };

  const Container& container_;
  uint64_t slot_count_;
  uint64_t slot_bytes_;
  CachePolicy policy_;
  bool verify_;
  platform::AlignedPtr<uint8_t> arena_;
  std::vector<Slot> slots_;
  std::unordered_map<uint32_t, int> index_;  // layer<<16 | expert -> slot
  uint64_t clock_ = 0;
  uint32_t rng_ = 0x9e3779b9u;
  ExpertCacheCounters counters_;
  mutable std::mutex mu_;
};

}  // namespace waste
