// The bounded expert cache (ENGINE.md §5): equal slots sized from the
// largest record, replacement by learned reuse odds (the default; or LFRU
// with sampled eviction as the reference, LRU, LFU with history), pinned
// records never evicted, hits never re-read. A miss is one positioned read
// of the whole record straight into its slot, from where its RecordSource
// says it lives (for the engine: the container's bank file, cache-bypass
// when the filesystem allows), checked by the source's validation callback
// on arrival (for the engine: Container::CheckRecord).
//
// Reads are asynchronous unless the reader is off (WASTE_IO_THREADS=0 or
// WASTE_IO=sync): Hint() issues all of a layer's misses at once (demand
// priority), Prefetch() issues the router lookahead's guesses (speculative
// priority), Warm() loads the learned hotlist (lowest priority); Acquire()
// of a record still in flight waits for it. All slot claims happen on the
// caller's thread under one mutex that no read ever holds.
//
// Cache contents and read timing only change speed: logits never depend on
// them (the tests compare every mode bit for bit).
#pragma once

#include <condition_variable>
#include <cstdio>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "base/thread_annotations.h"
#include "container/container.h"
#include "streaming/expert_reader.h"
#include "streaming/record_source.h"
#include "platform/platform.h"
#include "waste/config.h"
#include "waste/status.h"

namespace waste {

class ExpertCache;

// A record held in the cache: it cannot be evicted while the pin lives.
// Move-only; the destructor (or Reset) releases it. The cache must outlive
// its pins.
class ExpertPin {
 public:
  ExpertPin() = default;
  ExpertPin(ExpertPin&& other) noexcept { *this = std::move(other); }
  ExpertPin& operator=(ExpertPin&& other) noexcept;
  ExpertPin(const ExpertPin&) = delete;
  ExpertPin& operator=(const ExpertPin&) = delete;
  ~ExpertPin() { Reset(); }

  const ExpertRecordView& view() const { return view_; }
  bool held() const { return cache_ != nullptr; }
  // Releases now (a no-op on an empty pin).
  void Reset();

 private:
  friend class ExpertCache;
  ExpertPin(ExpertCache* cache, int slot, const ExpertRecordView& view)
      : cache_(cache), slot_(slot), view_(view) {}

  ExpertCache* cache_ = nullptr;
  int slot_ = -1;
  ExpertRecordView view_;
};

// A record the cache could not deliver, as data: which record, and why
// (the reason alone: "short read: ...", "checksum mismatch", ...). Callers
// that care which expert failed read the fields, never the message text.
struct ExpertFailure {
  int layer = -1;
  int expert = -1;
  Status reason;
  // The reason's code with "expert E of layer L: <reason>": what is reported.
  Status ToStatus() const;
};

// What Acquire returns: the pinned record or the failure. Reads like
// Result<ExpertPin>; error() is the failure as a Status.
class [[nodiscard]] ExpertResult {
 public:
  ExpertResult(ExpertPin pin) : pin_(std::move(pin)), ok_(true) {}          // NOLINT
  ExpertResult(ExpertFailure failure) : failure_(std::move(failure)) {}     // NOLINT
  bool has_value() const { return ok_; }
  explicit operator bool() const { return ok_; }
  ExpertPin& operator*() { return pin_; }
  ExpertPin* operator->() { return &pin_; }
  const ExpertFailure& failure() const { return failure_; }
  Status error() const { return failure_.ToStatus(); }

 private:
  ExpertPin pin_;
  ExpertFailure failure_;
  bool ok_ = false;
};

struct ExpertCacheCounters {
  uint64_t hits = 0;                 // demand accesses found resident (or in flight)
  uint64_t misses = 0;               // demand accesses that had to read
  uint64_t bytes_read = 0;           // demand + speculative bytes (warm-up excluded)
  uint64_t evictions = 0;
  uint64_t prefetched = 0;           // misses whose read was issued by a hint, before use
  uint64_t spec_reads = 0;           // router lookahead reads issued
  uint64_t spec_used = 0;            // lookahead records later demanded
  uint64_t warm_reads = 0;           // hotlist records loaded at open
  uint64_t waits = 0;                // Acquires that blocked on a read in flight
  double read_seconds = 0;           // time Acquire spent blocked on reads
  // The reader's view (every read, warm-up included).
  uint64_t io_reads = 0;
  uint64_t io_bytes = 0;
  double io_busy_seconds = 0;        // wall time with at least one read in flight
};

// Replacement policies beyond the public CachePolicy (WASTE_CACHE_POLICY).
// Under every policy a lookahead record nobody has used yet is never
// evicted before its layer routes (only a demand read with nothing else to
// take may), and one its layer routed past unused (a wrong guess) goes
// first: offline replays (tools/diskbench/cache_sim.py) put that at +3
// points of decode hits and fewer reads than plain LFRU.
enum class Replacement : uint8_t {
  kLfru = 0,       // ENGINE.md §5.2: lowest slot hits, ties by oldest use, 16 samples
  kLru = 1,        // oldest use, 16 samples
  kLfuHistory = 2, // lowest decayed access count of the (layer, expert) over the
                   // whole run (kept across evictions), ties by oldest use, full scan
  kReuseOdds = 3   // the default (issue #18): farthest expected next use, from
                   // reuse odds learned online per (tokens since last use, uses so
                   // far), plus the layers until the record's layer comes round;
                   // full scan. Reads a lookahead guess only while guesses of that
                   // rank for that layer have been right often enough (spec_gate).
};
const char* ReplacementName(Replacement r);

struct ExpertCacheOptions {
  Replacement policy = Replacement::kLfru;
  bool verify_crc = false;
  IoChoice io;                       // backend, reader threads, queue depth
  int max_speculative = 32;          // lookahead reads in flight at most
  // A lookahead guess of rank r for layer L is read only while at least this
  // share of L's rank-r guesses so far were then routed (the first 4 are
  // always read); 0 reads every guess. Below 0: the policy's own (0.7 under
  // kReuseOdds, 0 otherwise).
  float spec_gate = -1.0f;
  bool huge_pages = true;            // advise the arena for transparent huge pages
  std::string trace_path;            // WASTE_CACHE_TRACE: append every cache event here
  // Builds the reader instead of ExpertReader::Create(io) (the unit tests'
  // fake reader); a null reader means synchronous reads.
  std::function<Result<std::unique_ptr<ExpertReader>>(
      std::span<uint8_t> arena, uint64_t arena_stride, ExpertReader::Completion done)>
      make_reader;
};

// Slot geometry for a cache of at most `cache_bytes` holding records of
// `record_bytes`: 16 KiB-aligned, 16 KiB-padded slots (ENGINE.md §5.1),
// or 4 KiB-padded when padding would leave fewer than `min_slots`.
struct SlotLayout {
  uint64_t slot_bytes = 0;
  uint64_t slots = 0;
};
SlotLayout PlanSlots(uint64_t record_bytes, uint64_t cache_bytes, uint64_t min_slots);

class ExpertCache {
 public:
  static Result<std::unique_ptr<ExpertCache>> Create(RecordSource source,
                                                     const SlotLayout& layout,
                                                     const ExpertCacheOptions& options);
  // The container's banks (ContainerRecords with options.verify_crc).
  static Result<std::unique_ptr<ExpertCache>> Create(const Container& container,
                                                     const SlotLayout& layout,
                                                     const ExpertCacheOptions& options);
  // Compatibility: `slots` of the default 16 KiB-padded size, synchronous.
  static Result<std::unique_ptr<ExpertCache>> Create(const Container& container, uint64_t slots,
                                                     CachePolicy policy, bool verify_crc);
  ~ExpertCache();
  ExpertCache(const ExpertCache&) = delete;
  ExpertCache& operator=(const ExpertCache&) = delete;

  // Returns the record, pinned while the ExpertPin lives, or the failure
  // naming (layer, expert); its Status reads "expert E of layer L: <reason>".
  ExpertResult Acquire(int layer, int expert) WASTE_EXCLUDES(mu_);
  // True when (layer, expert) is in memory and read completely: Acquire
  // will not wait for it. For callers that order work so compute on
  // resident records covers the reads still in flight.
  bool Ready(int layer, int expert) const WASTE_EXCLUDES(mu_);

  // A layer has routed: these records will be Acquired next, in this order.
  // Pins them and starts every missing read at once (a sliding window of at
  // most min(64, slots/2) for long prefill lists). With step_reuses (a
  // prompt step that acquires a record once per table window and once more
  // for its decoded tokens), every listed record counts as needed again
  // within the step until the next Hint: replacement takes any other record
  // first, so a small cache does not evict what the step's next window reads.
  void Hint(int layer, std::span<const int> experts, bool step_reuses = false)
      WASTE_EXCLUDES(mu_);
  // Router lookahead's guess for the next MoE layer: speculative reads,
  // unpinned, not counted as misses (bytes are counted), never evicting a
  // pinned or in-flight record, skipped when no slot is free right now.
  void Prefetch(int layer, std::span<const int> experts) WASTE_EXCLUDES(mu_);
  // True when every record of `layer` is in memory or being read, so a
  // guess for it could start no read (the prefetcher then skips the router
  // matvec that makes the guess).
  bool HoldsLayer(int layer) const WASTE_EXCLUDES(mu_);

  struct WarmEntry {
    int layer, expert;
    uint32_t hits;
  };
  // Hotlist warm-up: loads entries in order into empty slots (never
  // evicting) with the given hit counts, through the reader threads at the
  // lowest priority (synchronously when there are none). Invalid entries
  // are skipped. Returns the number of reads started.
  int Warm(std::span<const WarmEntry> entries) WASTE_EXCLUDES(mu_);
  // Waits until every read issued so far has landed (tests, benchmarks).
  void Drain();

  uint64_t slots() const { return slot_count_; }
  uint64_t slot_bytes() const { return slot_bytes_; }
  uint64_t allocated_bytes() const { return slot_count_ * slot_bytes_; }
  // Bookkeeping besides the slots (index table, slot table, decay counts).
  uint64_t metadata_bytes() const WASTE_EXCLUDES(mu_);
  ExpertCacheCounters counters() const WASTE_EXCLUDES(mu_);
  IoBackend backend() const;
  int io_threads() const;
  int io_depth() const;
  bool fixed_buffers() const;
  Replacement policy() const { return policy_; }
  // The arena was advised for transparent huge pages (and the OS took it).
  bool huge_pages() const { return arena_.huge_pages(); }

  struct SlotUsage {
    int layer, expert;
    uint32_t hits, last;
  };
  std::vector<SlotUsage> Usage() const WASTE_EXCLUDES(mu_);  // finished records, slot order
  uint64_t clock() const WASTE_EXCLUDES(mu_);

 private:
  friend class ExpertPin;
  enum class State : uint8_t { kEmpty, kLoading, kReady, kFailed };
  enum class Origin : uint8_t { kDemand, kSpeculative, kWarm };
  struct Slot {
    uint8_t* data = nullptr;
    int layer = -1, expert = -1;
    State state = State::kEmpty;
    Origin origin = Origin::kDemand;
    bool used = false;               // demanded since it was loaded
    bool queued_low = false;         // read queued at speculative / warm priority
    uint64_t spec_gen = 0;           // hints seen when it was claimed
    uint32_t hits = 0;
    uint64_t last = 0;
    int pins = 0;
    ExpertRecordView view;
    Status error;                    // kFailed: the reason alone
  };
  // A hinted record's way through Hint → IssueHint → Acquire.
  enum class HintState : uint8_t {
    kPending,   // waiting for room in the hint window
    kIssued,    // slot pinned for it (read started or already resident)
    kConsumed,  // Acquired (the pin passed to the caller), or given up
  };
  struct HintEntry {
    int expert;
    int slot = -1;
    HintState state = HintState::kPending;
    bool miss = false;               // counted as a miss when issued
  };

  ExpertCache(RecordSource source, const SlotLayout& layout, const ExpertCacheOptions& o);
  bool Valid(int layer, int expert) const;
  size_t Key(int layer, int expert) const;
  // Everything below that touches the tables runs with mu_ held (checked
  // by clang's -Wthread-safety, base/thread_annotations.h).
  int FindVictim(std::unique_lock<std::mutex>* wait_lock, bool demand) WASTE_REQUIRES(mu_);
  bool Evictable(const Slot& s) const WASTE_REQUIRES(mu_);
  bool Better(const Slot& a, const Slot& b) const WASTE_REQUIRES(mu_);
  bool Pending(const Slot& s) const WASTE_REQUIRES(mu_);
  bool Stale(const Slot& s) const WASTE_REQUIRES(mu_);
  // The slot holds a record the current step will read again (Hint's step_reuses).
  bool InStep(const Slot& s) const WASTE_REQUIRES(mu_);
  void Claim(int slot, int layer, int expert, Origin origin, uint32_t hits) WASTE_REQUIRES(mu_);
  void Drop(int slot) WASTE_REQUIRES(mu_);
  void StartRead(int slot, ReadClass cls) WASTE_REQUIRES(mu_);
  void Trace(char kind, int layer, std::span<const int> ids) WASTE_REQUIRES(mu_);
  void Urgent(int slot) WASTE_REQUIRES(mu_);
  // Reason Ok when the record is ready.
  ExpertFailure ReadNow(int slot) WASTE_REQUIRES(mu_);
  // A slot being loaded belongs to the one read filling it: its completion
  // validates the bytes before taking mu_.
  Slot& LoadingSlot(int slot) WASTE_NO_THREAD_SAFETY_ANALYSIS;
  void OnRead(uint64_t tag, Status status) WASTE_EXCLUDES(mu_);
  bool IssueHint(HintEntry& e) WASTE_REQUIRES(mu_);
  void IssueHints() WASTE_REQUIRES(mu_);
  void ReleaseHint() WASTE_REQUIRES(mu_);
  ExpertResult WaitReady(int slot, std::unique_lock<std::mutex>& lock) WASTE_REQUIRES(mu_);
  void Release(int slot) WASTE_EXCLUDES(mu_);  // ExpertPin's end
  void CountAccess(int layer, int expert) WASTE_REQUIRES(mu_);
  // kReuseOdds bookkeeping (see Replacement).
  void NoteLayer(int layer) WASTE_REQUIRES(mu_);
  void NoteUse(size_t key) WASTE_REQUIRES(mu_);
  int OddsState(size_t key, uint32_t token) const WASTE_REQUIRES(mu_);
  double ExpectedGap(const Slot& s) const WASTE_REQUIRES(mu_);
  // The lookahead gate: scores the last guess for `layer` against its routing.
  void ScoreGuess(int layer, std::span<const int> routed) WASTE_REQUIRES(mu_);
  bool Trusted(int layer, size_t rank) const WASTE_REQUIRES(mu_);

  const RecordSource source_;
  uint64_t slot_count_;
  uint64_t slot_bytes_;
  Replacement policy_;
  int n_experts_ = 0;
  int max_spec_ = 32;
  size_t hint_window_ = 1;
  platform::LargeBuffer arena_;
  std::vector<Slot> slots_ WASTE_GUARDED_BY(mu_);
  // layer * experts + expert -> slot, -1 = absent
  std::vector<int32_t> index_ WASTE_GUARDED_BY(mu_);
  std::vector<int> free_ WASTE_GUARDED_BY(mu_);    // empty slots, popped from the back
  std::vector<float> freq_ WASTE_GUARDED_BY(mu_);  // kLfuHistory: decayed access counts per record
  float freq_step_ WASTE_GUARDED_BY(mu_) = 1.0f;
  uint64_t clock_ WASTE_GUARDED_BY(mu_) = 0;
  // kReuseOdds: tokens counted by layer order, per-record last token and
  // use count, and per state the records that were in it at a token's start
  // (exposure) and those of them used in that token (reused).
  static constexpr int kAgeBuckets = 8, kUseBuckets = 6;
  std::vector<int> layer_order_ WASTE_GUARDED_BY(mu_);  // -1 = not seen yet
  int layers_seen_ WASTE_GUARDED_BY(mu_) = 0;
  int odds_layer_ WASTE_GUARDED_BY(mu_) = -1;           // last hinted layer
  uint32_t token_ WASTE_GUARDED_BY(mu_) = 0;
  std::vector<uint32_t> last_token_ WASTE_GUARDED_BY(mu_);
  std::vector<uint32_t> uses_ WASTE_GUARDED_BY(mu_);    // 0 = never used
  std::vector<uint32_t> seen_ WASTE_GUARDED_BY(mu_);    // keys with uses_ > 0
  uint64_t exposure_[kAgeBuckets * kUseBuckets] WASTE_GUARDED_BY(mu_) = {};
  uint64_t reused_[kAgeBuckets * kUseBuckets] WASTE_GUARDED_BY(mu_) = {};
  // The lookahead gate: per (layer, rank) guesses scored and right.
  static constexpr size_t kGateRanks = 64;
  float spec_gate_ = 0.0f;
  int guess_layer_ WASTE_GUARDED_BY(mu_) = -1;
  std::vector<int> guess_ WASTE_GUARDED_BY(mu_);
  std::vector<uint32_t> guess_total_ WASTE_GUARDED_BY(mu_);
  std::vector<uint32_t> guess_right_ WASTE_GUARDED_BY(mu_);
  uint32_t rng_ WASTE_GUARDED_BY(mu_) = 0x9e3779b9u;
  int loading_ WASTE_GUARDED_BY(mu_) = 0;
  int spec_in_flight_ WASTE_GUARDED_BY(mu_) = 0;
  ExpertCacheCounters counters_ WASTE_GUARDED_BY(mu_);
  int hint_layer_ WASTE_GUARDED_BY(mu_) = -1;
  uint64_t hint_seq_ WASTE_GUARDED_BY(mu_) = 0;
  // Per record: the hint_seq_ of the last step_reuses Hint that listed it.
  std::vector<uint64_t> step_mark_ WASTE_GUARDED_BY(mu_);
  std::vector<HintEntry> hint_ WASTE_GUARDED_BY(mu_);
  size_t hint_cursor_ WASTE_GUARDED_BY(mu_) = 0;
  size_t hint_outstanding_ WASTE_GUARDED_BY(mu_) = 0;
  mutable Mutex mu_;
  std::condition_variable landed_;
  std::FILE* trace_ WASTE_GUARDED_BY(mu_) = nullptr;
  std::unique_ptr<ExpertReader> reader_;   // last: stopped before the slots go
};

}  // namespace waste
