#include "streaming/expert_cache.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>

#include <fmt/format.h>

namespace waste {
namespace {

constexpr uint64_t kSlotAlign = 16384;  // O_DIRECT sector rules and GPU page wrapping
constexpr uint64_t kPageAlign = platform::kBypassAlignment;
constexpr int kSamples = 16;            // ENGINE.md §5.2
constexpr size_t kMaxHintWindow = 64;   // ENGINE.md §5.4

uint64_t RoundUp(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

using Clock = std::chrono::steady_clock;

// Tag layout handed to the reader: slot | layer << 32 | expert << 48.
uint64_t MakeTag(int slot, int layer, int expert) {
  return static_cast<uint64_t>(static_cast<uint32_t>(slot)) |
         (static_cast<uint64_t>(static_cast<uint16_t>(layer)) << 32) |
         (static_cast<uint64_t>(static_cast<uint16_t>(expert)) << 48);
}

}  // namespace

const char* ReplacementName(Replacement r) {
  switch (r) {
    case Replacement::kLfru: return "lfru";
    case Replacement::kLru: return "lru";
    case Replacement::kLfuHistory: return "lfu-history";
    case Replacement::kReuseOdds: return "reuse-odds";
  }
  return "?";
}

SlotLayout PlanSlots(uint64_t record_bytes, uint64_t cache_bytes, uint64_t min_slots) {
  SlotLayout l;
  if (record_bytes == 0) return l;
  l.slot_bytes = RoundUp(record_bytes, kSlotAlign);
  l.slots = cache_bytes / l.slot_bytes;
  if (l.slots < min_slots) {
    // 16 KiB padding would starve a floor-sized cache (records far below
    // 16 KiB): pad to the bypass alignment only, which O_DIRECT accepts.
    uint64_t tight = RoundUp(record_bytes, kPageAlign);
    if (cache_bytes / tight > l.slots) {
      l.slot_bytes = tight;
      l.slots = cache_bytes / tight;
    }
  }
  return l;
}

Result<std::unique_ptr<ExpertCache>> ExpertCache::Create(const Container& container,
                                                         uint64_t slots, CachePolicy policy,
                                                         bool verify_crc) {
  SlotLayout l;
  l.slot_bytes = RoundUp(container.max_record_bytes(), kSlotAlign);
  l.slots = std::max<uint64_t>(slots, 1);
  ExpertCacheOptions o;
  o.policy = policy == CachePolicy::kLru    ? Replacement::kLru
             : policy == CachePolicy::kLfru ? Replacement::kLfru
                                            : Replacement::kReuseOdds;
  o.verify_crc = verify_crc;
  o.io.backend = IoBackend::kSync;
  return Create(container, l, o);
}

Result<std::unique_ptr<ExpertCache>> ExpertCache::Create(const Container& container,
                                                         const SlotLayout& layout,
                                                         const ExpertCacheOptions& options) {
  return Create(ContainerRecords(container, options.verify_crc), layout, options);
}

Result<std::unique_ptr<ExpertCache>> ExpertCache::Create(RecordSource source,
                                                         const SlotLayout& layout,
                                                         const ExpertCacheOptions& options) {
  const uint64_t record = source.max_record_bytes;
  SlotLayout l = layout;
  if (record == 0) l.slots = 0;  // dense model: nothing to hold
  if (record > 0 && l.slot_bytes < RoundUp(record, kPageAlign)) {
    return ArgError(fmt::format("expert cache slots of {} bytes cannot hold {}-byte records",
                                l.slot_bytes, record));
  }
  if (record > 0 && l.slots < 1) {
    return Status(Errc::kRamBudget, "the expert cache has room for no record at all");
  }
  std::unique_ptr<ExpertCache> cache(new ExpertCache(std::move(source), l, options));
  if (l.slots == 0) return cache;
  // One mapping for every slot, starting on a 2 MiB boundary (so also on
  // kSlotAlign): first touch of a multi-GB cache in huge pages costs 512x
  // fewer page faults than in 4 KiB ones (issue #18: a big budget was
  // slower than a small one for that reason).
  static_assert((size_t{2} << 20) % kSlotAlign == 0);
  WASTE_ASSIGN_OR_RETURN(
      cache->arena_,
      platform::LargeBuffer::Allocate(
          l.slots * l.slot_bytes, options.huge_pages,
          fmt::format("expert cache of {} slots x {} bytes", l.slots, l.slot_bytes)));
  {
    MutexLock lock(cache->mu_);  // not shared yet: for the analysis' sake
    for (uint64_t i = 0; i < l.slots; ++i) {
      cache->slots_[i].data = cache->arena_.data() + i * l.slot_bytes;
    }
  }
  ExpertCache* self = cache.get();
  const std::span<uint8_t> arena(cache->arena_.data(), l.slots * l.slot_bytes);
  ExpertReader::Completion done = [self](uint64_t tag, Status st) {
    self->OnRead(tag, std::move(st));
  };
  auto reader = options.make_reader
                    ? options.make_reader(arena, l.slot_bytes, std::move(done))
                    : ExpertReader::Create(options.io, arena, l.slot_bytes, std::move(done));
  WASTE_ASSIGN_OR_RETURN(cache->reader_, std::move(reader));
  return cache;
}

ExpertCache::ExpertCache(RecordSource source, const SlotLayout& layout,
                         const ExpertCacheOptions& o)
    : source_(std::move(source)),
      slot_count_(layout.slots),
      slot_bytes_(layout.slot_bytes),
      policy_(o.policy),
      max_spec_(std::max(1, o.max_speculative)),
      slots_(layout.slots) {
  n_experts_ = std::max(1, source_.experts);
  index_.assign(static_cast<size_t>(std::max(1, source_.layers)) * static_cast<size_t>(n_experts_),
                -1);
  step_mark_.assign(index_.size(), UINT64_MAX);  // no hint has that number
  if (policy_ == Replacement::kLfuHistory) freq_.assign(index_.size(), 0.0f);
  if (policy_ == Replacement::kReuseOdds) {
    layer_order_.assign(static_cast<size_t>(std::max(1, source_.layers)), -1);
    last_token_.assign(index_.size(), 0);
    uses_.assign(index_.size(), 0);
  }
  spec_gate_ = o.spec_gate >= 0.0f ? o.spec_gate
                                   : (policy_ == Replacement::kReuseOdds ? 0.7f : 0.0f);
  if (spec_gate_ > 0.0f) {
    guess_total_.assign(static_cast<size_t>(std::max(1, source_.layers)) * kGateRanks, 0);
    guess_right_.assign(guess_total_.size(), 0);
  }
  free_.reserve(slots_.size());
  hint_.reserve(static_cast<size_t>(n_experts_));
  for (size_t i = slots_.size(); i > 0; --i) free_.push_back(static_cast<int>(i - 1));
  hint_window_ = std::clamp<size_t>(static_cast<size_t>(layout.slots / 2), 1, kMaxHintWindow);
  // Developer aid: WASTE_CACHE_TRACE=FILE appends every hint (H), lookahead
  // guess (P) and demand access (A) for offline replacement studies
  // (tools/diskbench/cache_sim.py).
  if (!o.trace_path.empty()) trace_ = std::fopen(o.trace_path.c_str(), "a");
}

ExpertCache::~ExpertCache() {
  reader_.reset();  // drains: no completion may touch a slot after this
  if (trace_ != nullptr) std::fclose(trace_);
}

uint64_t ExpertCache::metadata_bytes() const {
  MutexLock lock(mu_);
  return slots_.capacity() * sizeof(Slot) + index_.capacity() * sizeof(int32_t) +
         free_.capacity() * sizeof(int) + freq_.capacity() * sizeof(float) +
         hint_.capacity() * sizeof(HintEntry) +
         (last_token_.capacity() + uses_.capacity() + seen_.capacity() +
          guess_total_.capacity() + guess_right_.capacity()) * sizeof(uint32_t) +
         layer_order_.capacity() * sizeof(int) + guess_.capacity() * sizeof(int);
}

bool ExpertCache::Valid(int layer, int expert) const {
  return layer >= 0 && layer < source_.layers && expert >= 0 && expert < source_.experts &&
         source_.locate(layer, expert).bytes > 0;
}

size_t ExpertCache::Key(int layer, int expert) const {
  return static_cast<size_t>(layer) * static_cast<size_t>(n_experts_) + static_cast<size_t>(expert);
}

Status ExpertFailure::ToStatus() const {
  return RecordError(layer, expert, reason);
}

// --- replacement ---------------------------------------------------------------

// A lookahead record not yet used whose layer has not routed since the
// guess: it is about to be needed (or not) — never evicted before that.
bool ExpertCache::Pending(const Slot& s) const {
  return s.origin == Origin::kSpeculative && !s.used && s.spec_gen == hint_seq_;
}

// A lookahead record its layer routed past without using: a wrong guess,
// the first thing to go.
bool ExpertCache::Stale(const Slot& s) const {
  return s.origin == Origin::kSpeculative && !s.used && s.spec_gen != hint_seq_;
}

bool ExpertCache::InStep(const Slot& s) const {
  return s.layer >= 0 && step_mark_[Key(s.layer, s.expert)] == hint_seq_;
}

bool ExpertCache::Better(const Slot& a, const Slot& b) const {
  const bool sa = Stale(a), sb = Stale(b);
  if (sa != sb) return sa;
  const bool ka = InStep(a), kb = InStep(b);
  if (ka != kb) return kb;
  switch (policy_) {
    case Replacement::kLru:
      return a.last < b.last;
    case Replacement::kLfuHistory: {
      float fa = freq_[Key(a.layer, a.expert)], fb = freq_[Key(b.layer, b.expert)];
      return fa < fb || (fa == fb && a.last < b.last);
    }
    case Replacement::kReuseOdds:
      return ExpectedGap(a) > ExpectedGap(b);
    case Replacement::kLfru:
    default:
      return a.hits < b.hits || (a.hits == b.hits && a.last < b.last);
  }
}

bool ExpertCache::Evictable(const Slot& s) const {
  return s.pins == 0 && s.state != State::kLoading && !Pending(s);
}

int ExpertCache::FindVictim(std::unique_lock<std::mutex>* wait_lock, bool demand) {
  for (;;) {
    if (!free_.empty()) {
      int i = free_.back();
      free_.pop_back();
      return i;
    }
    int best = -1;
    if (policy_ == Replacement::kLfuHistory) {
      for (size_t i = 0; i < slots_.size(); ++i) {
        const Slot& s = slots_[i];
        if (!Evictable(s)) continue;
        if (best < 0 || Better(s, slots_[static_cast<size_t>(best)])) best = static_cast<int>(i);
      }
    } else if (policy_ == Replacement::kReuseOdds) {
      // Better() with each slot's expected gap computed once: a wrong guess
      // first, then a record the current step will not read again (InStep),
      // then the farthest expected next use, ties to the lowest slot.
      bool best_stale = false, best_kept = false;
      double best_gap = 0;
      for (size_t i = 0; i < slots_.size(); ++i) {
        const Slot& s = slots_[i];
        if (!Evictable(s)) continue;
        const bool stale = Stale(s);
        const bool kept = InStep(s);
        const double gap = ExpectedGap(s);
        const bool better = best < 0 || (stale != best_stale ? stale
                                         : kept != best_kept ? !kept
                                                             : gap > best_gap);
        if (better) {
          best = static_cast<int>(i);
          best_stale = stale;
          best_kept = kept;
          best_gap = gap;
        }
      }
    } else {
      for (int draw = 0; draw < kSamples; ++draw) {
        rng_ = rng_ * 1664525u + 1013904223u;
        int i = static_cast<int>(rng_ % slots_.size());
        const Slot& s = slots_[static_cast<size_t>(i)];
        if (!Evictable(s)) continue;
        if (best < 0 || Better(s, slots_[static_cast<size_t>(best)])) best = i;
      }
      if (best < 0) {
        for (size_t i = 0; i < slots_.size(); ++i) {
          if (Evictable(slots_[i])) {
            best = static_cast<int>(i);
            break;
          }
        }
      }
    }
    if (best < 0 && demand) {
      // Only pending guesses are left unpinned: a demand read beats them.
      for (size_t i = 0; i < slots_.size(); ++i) {
        const Slot& s = slots_[i];
        if (s.pins == 0 && s.state != State::kLoading) {
          best = static_cast<int>(i);
          break;
        }
      }
    }
    if (best >= 0) {
      Slot& s = slots_[static_cast<size_t>(best)];
      if (s.layer >= 0) {
        index_[Key(s.layer, s.expert)] = -1;
        if (s.state == State::kReady) ++counters_.evictions;
      }
      s.layer = s.expert = -1;
      s.state = State::kEmpty;
      return best;
    }
    // Everything unpinned is still being read: wait for one to land.
    if (wait_lock == nullptr || loading_ == 0) return -1;
    landed_.wait(*wait_lock);
  }
}

void ExpertCache::Claim(int slot, int layer, int expert, Origin origin, uint32_t hits) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  s.layer = layer;
  s.expert = expert;
  s.state = State::kLoading;
  s.origin = origin;
  s.used = false;
  s.spec_gen = hint_seq_;
  s.hits = hits;
  s.last = clock_;
  s.pins = 0;
  s.view = {};
  s.error = Status::Ok();
  index_[Key(layer, expert)] = slot;
}

void ExpertCache::Drop(int slot) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.layer >= 0 && index_[Key(s.layer, s.expert)] == slot) index_[Key(s.layer, s.expert)] = -1;
  s.layer = s.expert = -1;
  s.state = State::kEmpty;
  s.pins = 0;
  s.view = {};
  free_.push_back(slot);
}

void ExpertCache::CountAccess(int layer, int expert) {
  if (policy_ == Replacement::kReuseOdds) NoteUse(Key(layer, expert));
  if (policy_ != Replacement::kLfuHistory) return;
  // Exponential decay without touching every count: each access is worth a
  // little more than the last; renormalise before floats lose precision.
  // Half-life: 16 accesses per slot of cache.
  const float half_life = static_cast<float>(std::max<uint64_t>(64, 16 * slot_count_));
  freq_[Key(layer, expert)] += freq_step_;
  freq_step_ *= std::exp2(1.0f / half_life);
  if (freq_step_ > 1e30f) {
    for (float& f : freq_) f /= freq_step_;
    freq_step_ = 1.0f;
  }
}

// State of a record at the start of `token`: log2 buckets of the tokens
// since its last use and of its uses so far.
int ExpertCache::OddsState(size_t key, uint32_t token) const {
  const uint32_t age = token - last_token_[key];
  const int a = std::min(static_cast<int>(std::bit_width(age)), kAgeBuckets - 1);
  const int u = std::min(static_cast<int>(std::bit_width(uses_[key])), kUseBuckets - 1);
  return a * kUseBuckets + u;
}

// A hint for `layer`: a new token begins when the layers come round again
// (a prefill chunk counts as one token). At each token's start every record
// used so far adds one to its state's exposure.
void ExpertCache::NoteLayer(int layer) {
  if (layer < 0 || static_cast<size_t>(layer) >= layer_order_.size()) return;
  int& order = layer_order_[static_cast<size_t>(layer)];
  if (order < 0) order = layers_seen_++;
  const int prev = odds_layer_ < 0 ? -1 : layer_order_[static_cast<size_t>(odds_layer_)];
  if (odds_layer_ < 0 || order <= prev) {
    ++token_;
    for (uint32_t key : seen_) ++exposure_[OddsState(key, token_)];
  }
  odds_layer_ = layer;
}

void ExpertCache::NoteUse(size_t key) {
  if (uses_[key] > 0) {
    if (last_token_[key] == token_) return;  // again in the same token (a prefill chunk)
    ++reused_[OddsState(key, token_)];
  } else {
    seen_.push_back(static_cast<uint32_t>(key));
  }
  last_token_[key] = token_;
  ++uses_[key];
}

// Layer steps until the slot's record is next used, expected: the layers
// until its layer comes round, then whole tokens at the learned odds that a
// record in its state is used in a token (a geometric wait).
double ExpertCache::ExpectedGap(const Slot& s) const {
  const double n = std::max(1, layers_seen_);
  const int cur = odds_layer_ < 0 ? 0 : std::max(0, layer_order_[static_cast<size_t>(odds_layer_)]);
  const int at = std::max(0, layer_order_[static_cast<size_t>(s.layer)]);
  int d = at - cur;
  const bool passed = d <= 0;  // its layer already ran in this token
  if (d <= 0) d += static_cast<int>(n);
  const size_t key = Key(s.layer, s.expert);
  double chance = 0.01;  // never used: a guess or warm record nobody has wanted yet
  if (uses_[key] > 0) {
    const int st = OddsState(key, token_ + (passed ? 1 : 0));
    chance = (static_cast<double>(reused_[st]) + 0.5) / (static_cast<double>(exposure_[st]) + 1.0);
  }
  return d + n * (1.0 / chance - 1.0);
}

void ExpertCache::ScoreGuess(int layer, std::span<const int> routed) {
  if (guess_layer_ != layer) return;
  guess_layer_ = -1;
  for (size_t r = 0; r < guess_.size() && r < kGateRanks; ++r) {
    const size_t at = static_cast<size_t>(layer) * kGateRanks + r;
    ++guess_total_[at];
    if (std::find(routed.begin(), routed.end(), guess_[r]) != routed.end()) ++guess_right_[at];
  }
}

bool ExpertCache::Trusted(int layer, size_t rank) const {
  if (spec_gate_ <= 0.0f || rank >= kGateRanks) return spec_gate_ <= 0.0f;
  const size_t at = static_cast<size_t>(layer) * kGateRanks + rank;
  const uint32_t total = guess_total_[at];
  if (total < 4) return true;  // too few scored: read it
  return static_cast<double>(guess_right_[at]) >= spec_gate_ * static_cast<double>(total);
}

// --- reads -----------------------------------------------------------------------

void ExpertCache::StartRead(int slot, ReadClass cls) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  const RecordLocation at = source_.locate(s.layer, s.expert);
  ReadRequest r;
  r.file = at.file;
  r.offset = at.offset;
  r.dst = s.data;
  r.bytes = at.bytes;
  r.tag = MakeTag(slot, s.layer, s.expert);
  r.cls = cls;
  ++loading_;
  if (cls == ReadClass::kSpeculative) ++spec_in_flight_;
  s.queued_low = cls != ReadClass::kDemand;
  reader_->Submit(r);
}

// Synchronous mode: the read happens here, on the caller's thread.
ExpertFailure ExpertCache::ReadNow(int slot) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  const int layer = s.layer, expert = s.expert;
  const RecordLocation at = source_.locate(layer, expert);
  auto t0 = Clock::now();
  Status st = at.file != nullptr ? at.file->ReadAt(at.offset, s.data, at.bytes)
                                 : IoError("the record source names no file");
  double dt = std::chrono::duration<double>(Clock::now() - t0).count();
  ++counters_.io_reads;
  counters_.io_busy_seconds += dt;
  if (s.origin != Origin::kWarm) counters_.read_seconds += dt;
  if (!st.ok()) {
    Drop(slot);
    return ExpertFailure{layer, expert, st};
  }
  counters_.io_bytes += at.bytes;
  if (s.origin != Origin::kWarm) counters_.bytes_read += at.bytes;
  auto view = source_.validate(layer, expert, s.data);
  if (!view) {
    Drop(slot);
    return ExpertFailure{layer, expert, view.error()};
  }
  s.view = *view;
  s.state = State::kReady;
  return ExpertFailure{layer, expert, Status::Ok()};
}

ExpertCache::Slot& ExpertCache::LoadingSlot(int slot) { return slots_[static_cast<size_t>(slot)]; }

// Completion, on a reader thread.
void ExpertCache::OnRead(uint64_t tag, Status status) {
  const int slot = static_cast<int>(tag & 0xffffffffu);
  const int layer = static_cast<int>((tag >> 32) & 0xffff);
  const int expert = static_cast<int>((tag >> 48) & 0xffff);
  Slot& s = LoadingSlot(slot);
  // The slot is ours while it is loading: validate outside the lock.
  Result<ExpertRecordView> view =
      status.ok() ? source_.validate(layer, expert, s.data) : Result<ExpertRecordView>(status);
  {
    MutexLock lock(mu_);
    --loading_;
    if (s.origin == Origin::kSpeculative) --spec_in_flight_;
    s.queued_low = false;
    if (status.ok()) {
      const uint64_t bytes = source_.locate(layer, expert).bytes;
      if (s.origin != Origin::kWarm) counters_.bytes_read += bytes;
    }
    if (view) {
      s.view = *view;
      s.state = State::kReady;
    } else if (s.pins == 0) {
      Drop(slot);  // nobody is waiting: a later demand re-reads and reports
    } else {
      s.state = State::kFailed;
      s.error = view.error();
    }
  }
  landed_.notify_all();
}

ExpertResult ExpertCache::WaitReady(int slot, std::unique_lock<std::mutex>& lock) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.state == State::kLoading) {
    auto t0 = Clock::now();
    ++counters_.waits;
    landed_.wait(lock, [&] { return s.state != State::kLoading; });
    counters_.read_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  if (s.state == State::kFailed) {
    ExpertFailure failed{s.layer, s.expert, s.error};
    if (--s.pins == 0) Drop(slot);
    return failed;
  }
  return ExpertPin(this, slot, s.view);
}

// --- hints -----------------------------------------------------------------------

bool ExpertCache::IssueHint(HintEntry& e) {
  const size_t key = Key(hint_layer_, e.expert);
  int s = index_[key];
  if (s >= 0) {
    ++slots_[static_cast<size_t>(s)].pins;
    e.miss = false;
    Urgent(s);
  } else {
    s = FindVictim(nullptr, /*demand=*/true);
    if (s < 0) return false;  // everything pinned or in flight: Acquire will wait
    Claim(s, hint_layer_, e.expert, Origin::kDemand, 1);
    slots_[static_cast<size_t>(s)].pins = 1;
    ++counters_.misses;
    ++counters_.prefetched;
    e.miss = true;
    StartRead(s, ReadClass::kDemand);
  }
  e.slot = s;
  e.state = HintState::kIssued;
  ++hint_outstanding_;
  return true;
}

void ExpertCache::IssueHints() {
  while (hint_outstanding_ < hint_window_ && hint_cursor_ < hint_.size()) {
    HintEntry& e = hint_[hint_cursor_];
    if (e.state != HintState::kPending) {
      ++hint_cursor_;
      continue;
    }
    if (!IssueHint(e)) return;
    ++hint_cursor_;
  }
}

void ExpertCache::ReleaseHint() {
  for (HintEntry& e : hint_) {
    if (e.state == HintState::kIssued) {
      Slot& s = slots_[static_cast<size_t>(e.slot)];
      if (--s.pins == 0 && s.state == State::kFailed) Drop(e.slot);
    }
  }
  hint_.clear();
  hint_cursor_ = 0;
  hint_outstanding_ = 0;
  hint_layer_ = -1;
}

void ExpertCache::Trace(char kind, int layer, std::span<const int> ids) {
  if (trace_ == nullptr) return;
  std::fprintf(trace_, "%c %d", kind, layer);
  for (int e : ids) std::fprintf(trace_, " %d", e);
  std::fputc('\n', trace_);
}

void ExpertCache::Hint(int layer, std::span<const int> experts, bool step_reuses) {
  MutexLock lock(mu_);
  Trace('H', layer, experts);
  if (spec_gate_ > 0.0f) ScoreGuess(layer, experts);
  if (policy_ == Replacement::kReuseOdds) NoteLayer(layer);
  ReleaseHint();
  ++hint_seq_;
  if (step_reuses) {
    for (int e : experts) {
      if (Valid(layer, e)) step_mark_[Key(layer, e)] = hint_seq_;
    }
  }
  if (!reader_ || slots_.empty()) return;  // synchronous: Acquire reads on demand
  hint_layer_ = layer;
  for (int e : experts) {
    if (Valid(layer, e)) hint_.push_back(HintEntry{e});
  }
  IssueHints();
}

// A scan of the layer's index entries, not a maintained count: it stops at
// the first absent record, so a layer that is not wholly held (the usual
// case under a small budget) costs a few reads, and a held one n_experts.
bool ExpertCache::HoldsLayer(int layer) const {
  MutexLock lock(mu_);
  if (layer < 0 || layer >= source_.layers) return false;
  const int32_t* entry = index_.data() + Key(layer, 0);
  return std::all_of(entry, entry + n_experts_, [](int32_t slot) { return slot >= 0; });
}

void ExpertCache::Prefetch(int layer, std::span<const int> experts) {
  MutexLock lock(mu_);
  Trace('P', layer, experts);
  if (!reader_ || slots_.empty()) return;  // synchronous: speculation would only add latency
  if (spec_gate_ > 0.0f && layer >= 0 && layer < source_.layers) {
    guess_layer_ = layer;
    guess_.assign(experts.begin(), experts.end());
  }
  int claimed[kMaxHintWindow];
  int n = 0;
  for (size_t rank = 0; rank < experts.size(); ++rank) {
    const int e = experts[rank];
    if (!Valid(layer, e) || index_[Key(layer, e)] >= 0) continue;
    if (!Trusted(layer, rank)) continue;  // guesses of this rank are mostly wrong here
    if (spec_in_flight_ + n >= max_spec_ || n == static_cast<int>(kMaxHintWindow)) break;
    int s = FindVictim(nullptr, /*demand=*/false);
    if (s < 0) break;
    Claim(s, layer, e, Origin::kSpeculative, 1);
    ++counters_.spec_reads;
    claimed[n++] = s;
  }
  // The reader takes speculative reads newest first: submit the best guess last.
  while (n > 0) StartRead(claimed[--n], ReadClass::kSpeculative);
}

void ExpertCache::Urgent(int slot) {
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.state == State::kLoading && s.queued_low && reader_) {
    reader_->Promote(MakeTag(slot, s.layer, s.expert));
    s.queued_low = false;
  }
}

// --- demand ----------------------------------------------------------------------

ExpertResult ExpertCache::Acquire(int layer, int expert) {
  MutexLock lock(mu_);
  if (!Valid(layer, expert)) return ExpertFailure{layer, expert, ArgError("no such expert record")};
  ++clock_;
  CountAccess(layer, expert);
  Trace('A', layer, std::span<const int>(&expert, 1));
  if (layer == hint_layer_) {
    for (size_t i = 0; i < hint_.size(); ++i) {
      HintEntry& e = hint_[i];
      if (e.expert != expert || e.state == HintState::kConsumed) continue;
      if (e.state == HintState::kPending && !IssueHint(e)) {
        // No slot right now: the plain path below waits for one.
        e.state = HintState::kConsumed;
        break;
      }
      e.state = HintState::kConsumed;
      --hint_outstanding_;
      Slot& s = slots_[static_cast<size_t>(e.slot)];
      if (!e.miss) {
        ++counters_.hits;
        ++s.hits;
      }
      s.last = clock_;
      if (s.origin == Origin::kSpeculative && !s.used) ++counters_.spec_used;
      s.used = true;
      IssueHints();
      return WaitReady(e.slot, lock.native());  // the hint's pin is now the caller's
    }
  }
  int s = index_[Key(layer, expert)];
  if (s >= 0) {
    Slot& sl = slots_[static_cast<size_t>(s)];
    ++counters_.hits;
    ++sl.hits;
    sl.last = clock_;
    ++sl.pins;
    if (sl.origin == Origin::kSpeculative && !sl.used) ++counters_.spec_used;
    sl.used = true;
    Urgent(s);
    return WaitReady(s, lock.native());
  }
  ++counters_.misses;
  s = FindVictim(reader_ ? &lock.native() : nullptr, /*demand=*/true);
  if (s < 0) {
    return ExpertFailure{layer, expert, IoError("expert cache could not free a slot to read into")};
  }
  Claim(s, layer, expert, Origin::kDemand, 1);
  Slot& sl = slots_[static_cast<size_t>(s)];
  sl.pins = 1;
  sl.used = true;
  if (reader_) {
    StartRead(s, ReadClass::kDemand);
    return WaitReady(s, lock.native());
  }
  ExpertFailure failed = ReadNow(s);
  if (!failed.reason.ok()) return failed;
  return ExpertPin(this, s, sl.view);
}

bool ExpertCache::Ready(int layer, int expert) const {
  MutexLock lock(mu_);
  if (!Valid(layer, expert)) return false;
  int s = index_[Key(layer, expert)];
  return s >= 0 && slots_[static_cast<size_t>(s)].state == State::kReady;
}

ExpertPin& ExpertPin::operator=(ExpertPin&& other) noexcept {
  if (this != &other) {
    Reset();
    cache_ = std::exchange(other.cache_, nullptr);
    slot_ = std::exchange(other.slot_, -1);
    view_ = std::exchange(other.view_, {});
  }
  return *this;
}

void ExpertPin::Reset() {
  if (cache_ != nullptr) cache_->Release(slot_);
  cache_ = nullptr;
  slot_ = -1;
  view_ = {};
}

void ExpertCache::Release(int slot) {
  MutexLock lock(mu_);
  if (slot < 0 || static_cast<size_t>(slot) >= slots_.size()) return;
  Slot& s = slots_[static_cast<size_t>(slot)];
  if (s.pins > 0) --s.pins;
}

// --- warm-up -----------------------------------------------------------------------

int ExpertCache::Warm(std::span<const WarmEntry> entries) {
  MutexLock lock(mu_);
  int started = 0;
  for (const WarmEntry& w : entries) {
    if (free_.empty()) break;  // warm-up never evicts
    if (!Valid(w.layer, w.expert) || index_[Key(w.layer, w.expert)] >= 0) continue;
    int s = free_.back();
    free_.pop_back();
    Claim(s, w.layer, w.expert, Origin::kWarm, std::max<uint32_t>(1, w.hits));
    if (policy_ == Replacement::kLfuHistory) {
      freq_[Key(w.layer, w.expert)] = static_cast<float>(std::max<uint32_t>(1, w.hits));
    }
    if (policy_ == Replacement::kReuseOdds) {
      // As if used now, as often as the hotlist says.
      const size_t key = Key(w.layer, w.expert);
      if (uses_[key] == 0) seen_.push_back(static_cast<uint32_t>(key));
      uses_[key] = std::max<uint32_t>(1, w.hits);
      last_token_[key] = token_;
    }
    ++counters_.warm_reads;
    ++started;
    if (reader_) {
      StartRead(s, ReadClass::kWarm);
    } else {
      (void)ReadNow(s);  // a damaged record is simply not warmed (Drop frees it)
    }
  }
  return started;
}

void ExpertCache::Drain() {
  if (reader_) reader_->Drain();
}

// --- reporting ---------------------------------------------------------------------

ExpertCacheCounters ExpertCache::counters() const {
  ExpertCacheCounters c;
  {
    MutexLock lock(mu_);
    c = counters_;
  }
  if (reader_) {
    ReaderCounters r = reader_->counters();
    c.io_reads = r.reads;
    c.io_bytes = r.bytes;
    c.io_busy_seconds = r.busy_seconds;
  }
  return c;
}

IoBackend ExpertCache::backend() const { return reader_ ? reader_->backend() : IoBackend::kSync; }
int ExpertCache::io_threads() const { return reader_ ? reader_->threads() : 0; }
int ExpertCache::io_depth() const { return reader_ ? reader_->depth() : 1; }
bool ExpertCache::fixed_buffers() const { return reader_ && reader_->fixed_buffers(); }

uint64_t ExpertCache::clock() const {
  MutexLock lock(mu_);
  return clock_;
}

std::vector<ExpertCache::SlotUsage> ExpertCache::Usage() const {
  MutexLock lock(mu_);
  std::vector<SlotUsage> out;
  for (const Slot& s : slots_) {
    if (s.layer >= 0 && s.state == State::kReady) {
      out.push_back({s.layer, s.expert, s.hits, static_cast<uint32_t>(s.last)});
    }
  }
  return out;
}

}  // namespace waste
