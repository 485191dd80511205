// Prefix reuse: the server's conversation slots (`--parallel N`), each a
// Session of the one Model with a rewind mark (Session::SetMark) at a
// restore point. A request whose prompt starts with a slot's marked tokens
// rewinds the slot there and prefills only the rest; a chat that resends
// its history pays only for the new turn. A mark copies only the KDA state
// (the session only moves forward after it, so its latent rows below the
// mark stay), where a snapshot would hold the whole state again: 43 MiB a
// slot at Kimi-Linear's width whatever the context, against 106 MiB at
// 4,096 positions and 547 MiB at 32,768.
//
// Restore points. KDA layers carry a recurrent state that cannot be rolled
// back, so a session can only resume from a mark set exactly at a
// position <= the shared prefix. And the answer must not depend on where
// prefill restarted: prompts run in chunks of kPrefillChunkTokens (128,
// waste/types.h), and the chunking changes the floating-point order inside
// a chunk. So marks sit on multiples of the chunk counted from position
// 0: a resumed prefill then cuts the prompt into exactly the chunks a fresh
// one would, and gives the same bits (tests/server/prefix_reuse_test.cc
// checks logits and tokens). The point is the last multiple of the chunk
// before the prompt's last token (one
// token must stay to produce the logits) and before its first image pad
// (an image's rows are spliced only by the call that sees all its pads).
//
// Concurrency. Requests run at once (server/engine_worker.h), each on a
// slot of its own: a Run holds its slot until it is destroyed, and Prepare
// chooses among the free slots only (the longest usable prefix among them,
// else the least recently used). Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "waste/waste.h"

namespace waste::server {

class SessionPool {
 public:
  static constexpr int kChunk = kPrefillChunkTokens;  // the engine's prefill chunk (see above)
  // Restored prefill is fed in spans (waste/types.h): fewer expert reads,
  // the same bits; a client that leaves is noticed between spans.
  static constexpr size_t kSpan = kPrefillSpanTokens;

  // `slots` sessions: the engine's own plus slots-1 new ones. kRamBudget
  // when the plan has no room for them (Config::max_sessions); kUnsupported
  // when the engine was opened without Config::rewind_marks.
  static Result<std::unique_ptr<SessionPool>> Create(Engine& engine, int slots);

  struct Slot;
  // A slot held by one request; given back when destroyed.
  class Lease {
   public:
    Lease() = default;
    Lease(SessionPool* pool, Slot* slot) : pool_(pool), slot_(slot) {}
    Lease(Lease&& o) noexcept : pool_(o.pool_), slot_(o.slot_) { o.slot_ = nullptr; }
    Lease& operator=(Lease&& o) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();

   private:
    SessionPool* pool_ = nullptr;
    Slot* slot_ = nullptr;
  };

  struct Run {
    Session* session = nullptr;
    int cached_tokens = 0;   // prompt tokens rewound to instead of prefilled
    std::span<const int> rest;  // what Generate must still be given
    // The session's counters when the request took it (before any prefill):
    // with session->stats() after, the request's own expert traffic.
    Stats before;
    Lease lease;
  };
  // Picks the free slot with the longest usable prefix (else the least
  // recently used), rewinds or resets it, prefills up to the new restore
  // point and marks it there. `ids` must outlive the returned span.
  // `cancelled` (optional) is asked before each span; true stops with
  // kCancelled (the slot keeps its previous mark: what was fed since lies
  // past it). kBusy when every slot is held.
  Result<Run> Prepare(std::span<const int> ids, const std::function<bool()>& cancelled = {});
  // A free slot reset to position 0 with nothing fed (the least recently
  // used one; it keeps no restore point): for a request that needs every
  // prompt position computed, such as one scoring its prompt. `rest` is all
  // of ids. kBusy when every slot is held.
  Result<Run> PrepareFresh(std::span<const int> ids);

  // The prompt cache (`waste serve --prompt-cache DIR`, server/prompt_cache.cc):
  // every slot's restore point kept on disk across restarts. Save writes
  // slot-N.state (the session at its mark, the engine's session file) and
  // slot-N.tokens.json (the tokens before it) for each slot that has one,
  // and removes the pair of a slot that has none; call it when no request
  // runs (every session is rewound to its mark). Load restores each pair
  // that is sound into its slot; a pair that is not (unreadable, another
  // container, tokens that do not match the state or the vocabulary, a
  // point not on a chunk boundary, a state other than the one the token
  // file names by its hash) leaves its slot empty and is named in
  // `skipped`; Save leaves such a pair alone unless the slot has its own
  // point by then. Neither touches files other than those pairs.
  struct CacheReport {
    int conversations = 0;          // slots saved or restored
    uint64_t tokens = 0;            // their tokens, all together
    std::vector<std::string> skipped;  // "slot-N: why", per pair not restored or saved
  };
  CacheReport SaveMarks(const std::string& dir);
  CacheReport LoadMarks(const std::string& dir);

  int slots() const { return static_cast<int>(slots_.size()); }
  // Prompt tokens the slots' marks cover, all slots together.
  uint64_t kept_tokens() const;
  // The model's image queue is one for all sessions (include/waste/model.h):
  // a request that queues images, or feeds media pads, holds this from
  // clearing the queue until its generation ends.
  std::mutex& image_queue() { return images_mu_; }

  struct Slot {
    Session* session = nullptr;
    std::unique_ptr<Session> owned;  // null for the engine's own session
    std::vector<int> tokens;         // the tokens up to the session's mark; empty = none kept
    uint64_t last_used = 0;
    bool held = false;               // a request is using it (under mu_)
    bool cache_skipped = false;      // LoadMarks found a pair it could not use
  };

 private:
  SessionPool(Engine& engine) : engine_(engine) {}
  int Usable(const Slot& s, std::span<const int> ids, size_t limit) const;
  // Marks and returns the free slot with the longest usable prefix of `ids`
  // within `limit` (its length in *usable), else the least recently used
  // free one; null when every slot is held.
  Slot* Take(std::span<const int> ids, size_t limit, int* usable);
  void Give(Slot* slot);

  Engine& engine_;
  std::vector<Slot> slots_;
  mutable std::mutex mu_;  // slots' `tokens`, `last_used`, `held`; clock_
  uint64_t clock_ = 0;
  std::mutex images_mu_;
};

}  // namespace waste::server
