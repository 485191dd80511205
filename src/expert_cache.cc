#include "expert_cache.h"

#include <chrono>

#include <fmt/format.h>

namespace waste {
namespace {

constexpr uint64_t kSlotAlign = 16384;  // O_DIRECT sector rules and GPU page wrapping

uint32_t Key(int layer, int expert) {
  return (static_cast<uint32_t>(layer) << 16) | static_cast<uint32_t>(expert);
}

}  // namespace

Result<std::unique_ptr<ExpertCache>> ExpertCache::Create(const Container& container,
                                                         uint64_t slots, CachePolicy policy,
                                                         bool verify_crc) {
  uint64_t record = container.max_record_bytes();
  uint64_t slot_bytes = (record + kSlotAlign - 1) / kSlotAlign * kSlotAlign;
  if (slots < 1) slots = 1;
  std::unique_ptr<ExpertCache> cache(
      new ExpertCache(container, slots, slot_bytes, policy, verify_crc));
  if (record == 0) return cache;  // dense model: nothing to hold
  void* p = platform::AlignedAlloc(kSlotAlign, slots * slot_bytes);
  if (p == nullptr) {
    return OomError(fmt::format("expert cache of {} slots x {} bytes", slots, slot_bytes));
  }
  cache->arena_.reset(static_cast<uint8_t*>(p));
  for (uint64_t i = 0; i < slots; ++i) cache->slots_[i].data = cache->arena_.get() + i * slot_bytes;
  return cache;
}

ExpertCache::ExpertCache(const Container& c, uint64_t slots, uint64_t slot_bytes,
                         CachePolicy policy, bool verify)
    : container_(c),
      slot_count_(slots),
      slot_bytes_(slot_bytes),
      policy_(policy),
      verify_(verify),
      slots_(slots) {
  index_.reserve(slots * 2);
}

int ExpertCache::FindVictim() {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].layer < 0 && slots_[i].pins == 0) return static_cast<int>(i);
  }
  int best = -1;
  for (int draw = 0; draw < 16; ++draw) {
    rng_ = rng_ * 1664525u + 1013904223u;
    int i = static_cast<int>(rng_ % slots_.size());
    const Slot& s = slots_[static_cast<size_t>(i)];
    if (s.pins > 0) continue;
    if (best < 0) {
      best = i;
      continue;
    }
    const Slot& b = slots_[static_cast<size_t>(best)];
    bool better = policy_ == CachePolicy::kLru
                      ? s.last < b.last
                      : (s.hits < b.hits || (s.hits == b.hits && s.last < b.last));
    if (better) best = i;
  }
  if (best >= 0) return best;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].pins == 0) return static_cast<int>(i);
  }
  return -1;
}

Status ExpertCache::ReadInto(int slot_index, int layer, int expert) {
  Slot& s = slots_[static_cast<size_t>(slot_index)];
  const BankInfo& bank = container_.bank(layer);
  auto t0 = std::chrono::steady_clock::now();
  Status st = container_.bank_file(layer).ReadAt(static_cast<uint64_t>(expert) * bank.record_bytes,
                                                 s.data, bank.record_bytes);
  counters_.read_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) {
    return IoError(fmt::format("expert {} of layer {}: short read ({})", expert, layer,
                               st.message()));
  }
  counters_.bytes_read += bank.record_bytes;
  auto view = container_.ParseRecord(layer, expert, s.data, verify_);
  if (!view) return view.error();
  s.view = *view;
  return Status::Ok();
}

Result<ExpertRef> ExpertCache::Acquire(int layer, int expert) {
  std::lock_guard<std::mutex> lock(mu_);
  ++clock_;
  auto it = index_.find(Key(layer, expert));
  if (it != index_.end()) {
    Slot& s = slots_[static_cast<size_t>(it->second)];
    ++s.hits;
    s.last = clock_;
    ++s.pins;
    ++counters_.hits;
    return ExpertRef{s.view, it->second};
  }
  int victim = FindVictim();
  if (victim < 0) {
    return IoError(fmt::format("expert {} of layer {}: expert cache could not free a slot to "
                               "read into", expert, layer));
  }
  Slot& s = slots_[static_cast<size_t>(victim)];
  if (s.layer >= 0) {
    index_.erase(Key(s.layer, s.expert));
    ++counters_.evictions;
  }
  s.layer = -1;
  s.expert = -1;
  ++counters_.misses;
  WASTE_TRY(ReadInto(victim, layer, expert));
  s.layer = layer;
  s.expert = expert;
  s.hits = 1;
  s.last = clock_;
  s.pins = 1;
  index_[Key(layer, expert)] = victim;
  return ExpertRef{s.view, victim};
}

void ExpertCache::Release(int slot) {
  std::lock_guard<std::mutex> lock(mu_);
  if (slot >= 0 && slots_[static_cast<size_t>(slot)].pins > 0) --slots_[static_cast<size_t>(slot)].pins;
}

void ExpertCache::Hint(int layer, std::span<const int> experts) {
  (void)layer;
  (void)experts;  // synchronous reads: Acquire reads on demand
}

void ExpertCache::Prefetch(int layer, std::span<const int> experts) {
  (void)layer;
  (void)experts;  // synchronous reads: speculation would only add latency
}

bool ExpertCache::Preload(int layer, int expert, uint32_t hits) {
  std::lock_guard<std::mutex> lock(mu_);
  if (index_.count(Key(layer, expert)) != 0) return true;
  int free_slot = -1;
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].layer < 0) {
      free_slot = static_cast<int>(i);
      break;
    }
  }
  if (free_slot < 0) return false;
  uint64_t before = counters_.bytes_read;
  double before_s = counters_.read_seconds;
  Status st = ReadInto(free_slot, layer, expert);
  // Warm reads count neither as misses nor in bytes_read (ENGINE.md §5.8).
  counters_.bytes_read = before;
  counters_.read_seconds = before_s;
  if (!st.ok()) return true;  // a damaged record is simply not warmed
  Slot& s = slots_[static_cast<size_t>(free_slot)];
  s.layer = layer;
  s.expert = expert;
  s.hits = hits > 0 ? hits : 1;
  s.last = clock_;
  index_[Key(layer, expert)] = free_slot;
  return true;
}

ExpertCacheCounters ExpertCache::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return counters_;
}

std::vector<ExpertCache::SlotUsage> ExpertCache::Usage() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<SlotUsage> out;
  for (const Slot& s : slots_) {
    if (s.layer >= 0) {
      out.push_back({s.layer, s.expert, s.hits, static_cast<uint32_t>(s.last)});
    }
  }
  return out;
}

}  // namespace waste
