// What a Model shares with its sessions (ModelCore) and what one Session
// owns (SessionCore). The public classes in include/waste/model.h are thin
// handles over these; sessions hold a shared_ptr to the core so the
// container outlives the Model handle while sessions are open.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "base/engine_env.h"
#include "base/fair_mutex.h"
#include "base/profile.h"
#include "container/container.h"
#include "kernels/kernel_table.h"
#include "model/forward.h"
#include "model/layer_weights.h"
#include "model/session_state.h"
#include "platform/platform.h"
#include "runtime/ops.h"
#include "runtime/thread_pool.h"
#include "streaming/expert_cache.h"
#include "text/tokenizer.h"
#include "vision/vision_context.h"
#include "waste/config.h"
#include "waste/memplan.h"
#include "waste/types.h"

namespace waste {

struct SessionCore;

struct ModelCore {
  // First member, so it is released last (after every file is closed).
  platform::DirLock lock;  // exclusive open (ENGINE.md §5.9)
  Config config;
  EngineOptions options;
  MemPlan plan;
  BudgetResolution budget;
  std::unique_ptr<Container> container;
  ModelWeights weights;
  std::unique_ptr<ThreadPool> pool;
  kernels::KernelTable table;
  std::unique_ptr<Ops> ops;
  std::unique_ptr<Profiler> profiler;  // WASTE_PROFILE=1
  std::unique_ptr<ExpertCache> cache;
  std::unique_ptr<Tokenizer> tokenizer;
  ModelInfo info;
  std::unique_ptr<vision::VisionContext> vision;  // Config::vision + a tower
  uint64_t vision_bytes = 0;                      // added to the plan when loaded
  std::string usage_path;
  uint64_t id = 0;  // unique per opened model in this process (snapshots check it)

  // One session runs the network at a time (the pool, ops scratch and the
  // cache's demand path are not reentrant); sessions waiting for it get it
  // in the order they asked (FairMutex), so interleaved streams take turns.
  FairMutex run_mu;

  // Session accounting, under acct_mu.
  mutable std::mutex acct_mu;
  uint64_t session_reserve = 0;   // plan state + scratch, less the snapshots' room
  uint64_t session_charged = 0;   // what the open sessions are charged
  std::set<const SessionCore*> sessions;
  Stats totals;                   // generation counters of every session so far

  // Bytes a session of `ctx` positions is charged against the reserve.
  uint64_t SessionCharge(uint32_t ctx) const;
  // The cache and I/O fields of Stats, model-wide.
  void FillCacheStats(Stats* s) const;
};

// The image queue's lifetime around one Eval/Generate call (docs/VISION.md,
// vision/image_queue.h): armed only when the call's tokens hold a media
// pad, so the calls of other sessions never touch another's images.
struct ImageCall {
  ModelCore& m;
  bool armed = false;
  ImageCall(ModelCore& model, std::span<const int> ids) : m(model) {
    if (!m.vision) return;
    const int pad = m.vision->queue().pad_id();
    if (std::find(ids.begin(), ids.end(), pad) == ids.end()) return;
    m.vision->queue().Arm();
    armed = true;
  }
  // Ends the call's use of the queue early: Generate does so once its prompt
  // is fed, before its token callbacks let other sessions' calls re-arm it.
  void Done() {
    if (armed && m.vision) m.vision->queue().Release();
    armed = false;
  }
  ~ImageCall() { Done(); }
};

// Session::SetMark's rewind point (rewind_mark.cc): the recurrent state
// copied, the latent rows only counted (they are append-only, so the rows
// below a mark stay as they were while the session moves forward).
struct RewindMark {
  bool valid = false;  // cleared by Reset, Restore and LoadState
  int pos = 0;
  int pending = -1;
  std::vector<KdaLayerState> kda;  // per layer (empty for MLA layers)
  std::vector<int> mla_n_kv;
  uint64_t bytes() const;
};

struct SessionCore {
  std::shared_ptr<ModelCore> model;
  uint32_t ctx = 0;
  uint64_t charge = 0;
  std::unique_ptr<SessionState> state;
  std::unique_ptr<Forward> forward;
  // This session's generation counters, and its own expert traffic
  // (experts_hit/missed, bytes_read, sec_io, read_waits: what its forward
  // passes asked of the shared cache, counted in Feed under run_mu).
  Stats stats;
  std::string detail;
  // The expert record the last call failed on (its Status::failed_expert()).
  std::optional<ExpertFailureInfo> failed_expert;
  int pending = -1;   // emitted by Generate but not yet fed (fed on next use)
  // Config::rewind_marks of them, each allocated by its first SetMark, then
  // Generate's own for drafting (Config::draft_tokens: the state before a
  // verifying pass, to go back to when a guess is refused).
  std::vector<std::unique_ptr<RewindMark>> marks;
  size_t MarkSlots() const;
  size_t DraftMarkSlot() const;
  // run_mu held. SaveMark copies the state into slot `i`; LoadMark puts
  // the session back there and drops the marks further on (false when the
  // slot holds none).
  void SaveMark(size_t i);
  bool LoadMark(size_t i);
  void DropMarks() {
    for (std::unique_ptr<RewindMark>& m : marks) {
      if (m) m->valid = false;
    }
  }
  // What Model::memory_used reports for this session, under the model's
  // acct_mu: the sizes as of its last call (they change only inside calls,
  // under run_mu, and memory_used must not read them then).
  uint64_t reported_state = 0;
  uint64_t reported_scratch = 0;
  // Set while Generate runs the host's callbacks (run_mu released): a call
  // on this same session from there would change the state under Generate.
  std::atomic<bool> in_callback{false};
  // kArg while in_callback (docs/EMBEDDING.md: a callback may drive other
  // sessions, not its own).
  Status CheckNotInCallback() const;

  ~SessionCore();
  // Stores the current sizes as reported_*; the caller holds run_mu (or is
  // the only user, as in NewSession).
  void Report();

  // A call starts with no detail and no failed expert.
  void ClearDetail() {
    detail.clear();
    failed_expert.reset();
  }

  Status CheckIds(std::span<const int> ids) const;
  std::string ContextFull() const;
  // A call's ids (the pending token included in `need`) do not fit the room
  // left; `reply` when Generate keeps one position for the first token.
  std::string DoesNotFit(int64_t need, bool reply) const;
  // Feeds `ids` (prefixed by the pending token, if any). Caller holds run_mu.
  // With `scores`: also the log-probability of each next id within `ids`
  // (and of `next_after` when >= 0), with the `top` most likely tokens
  // (Forward::RunScored; the pending token's own row is not scored).
  Status Feed(std::span<const int> ids, bool want_logits, std::vector<TokenScore>* scores = nullptr,
              int top = 0, int next_after = -1);
  Status Flush() { return pending >= 0 ? Feed({}, false) : Status::Ok(); }
  // Eval's and Score's call: checks ids (and `next`), takes run_mu, checks
  // the room, feeds with logits (and scores when `scores` is set).
  Status FeedCall(std::span<const int> ids, std::vector<TokenScore>* scores, int top, int next);
  // Feed(ids, true) in prompt spans, calling `progress` (if set) after each;
  // a false return stops feeding and sets *cancelled (what was fed stays).
  // *fed: the prompt tokens fed, also when it stops or fails part way.
  // With `scores`, the prompt is scored as Feed scores it (ids.size() - 1
  // entries when it is fed whole).
  Status FeedPrompt(std::span<const int> ids, const std::function<bool(int, int)>& progress,
                    bool* cancelled, size_t* fed, std::vector<TokenScore>* scores = nullptr,
                    int top = 0);
  // NaN/Inf logits (bad scales, overflowing activations) end the call with
  // an error, never come out as token 0 or a printed "nan".
  Status CheckLogits() const;
  // Feeds `ids` (no pending token) keeping every position's logits
  // (Forward::RunAllLogits): a drafting pass. Caller holds run_mu.
  Status FeedAllLogits(std::span<const int> ids);
  // Adds generation counters to this session's and the model's totals.
  void Account(double prefill_s, uint64_t prefill_tokens, double decode_s, uint64_t generated);
  // Adds drafting counters (Stats::draft_*) likewise.
  void AccountDrafts(uint64_t passes, uint64_t guessed, uint64_t accepted);
  // Adds the cache traffic of one forward pass (counters around it) to stats.
  void CountTraffic(const ExpertCacheCounters& before, const ExpertCacheCounters& after);
};

// The state file (ENGINE.md §8) and in-RAM snapshot helpers (snapshot.cc).
struct SnapshotData {
  uint64_t model_id = 0;
  int pos = 0;
  std::vector<KdaLayerState> kda;           // per layer (empty for MLA layers)
  std::vector<std::vector<float>> mla_rows; // per layer: the n_kv rows in use
  std::vector<int> mla_n_kv;
  uint64_t bytes = 0;
};

std::shared_ptr<const SnapshotData> TakeSnapshot(const ModelCore& model, SessionState& state);
// kArg (state untouched) when the snapshot does not fit.
Status RestoreSnapshot(const ModelCore& model, const SnapshotData& snap, SessionState& state);

}  // namespace waste
