// Prefix reuse: the server's conversation slots (`--parallel N`), each a
// Session of the one Model plus a RAM snapshot of its state at a restore
// point. A request whose prompt starts with a slot's snapshot tokens is
// restored there and prefills only the rest; a chat that resends its
// history pays only for the new turn.
//
// Restore points. KDA layers carry a recurrent state that cannot be rolled
// back, so a session can only resume from a snapshot taken exactly at a
// position <= the shared prefix. And the answer must not depend on where
// prefill restarted: prompts run in chunks of kPrefillChunkTokens (128,
// waste/types.h), and the chunking changes the floating-point order inside
// a chunk. So snapshots sit on multiples of the chunk counted from position
// 0: a resumed prefill then cuts the prompt into exactly the chunks a fresh
// one would, and gives the same bits (tests/server/prefix_reuse_test.cc
// checks logits and tokens). The point is the last multiple of the chunk
// before the prompt's last token (one
// token must stay to produce the logits) and before its first image pad
// (an image's rows are spliced only by the call that sees all its pads).
//
// Used only on the engine thread; not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
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
  // when the plan has no room for them (Config::max_sessions); the plan
  // keeps room for one snapshot per slot only with max_snapshots >= slots.
  static Result<std::unique_ptr<SessionPool>> Create(Engine& engine, int slots);

  struct Run {
    Session* session = nullptr;
    int cached_tokens = 0;   // prompt tokens restored instead of prefilled
    std::span<const int> rest;  // what Generate must still be given
  };
  // Picks the slot with the longest usable prefix (else the least recently
  // used), restores or resets it, prefills up to the new restore point and
  // snapshots there. `ids` must outlive the returned span. `cancelled`
  // (optional) is asked after each 64-token chunk; true stops with
  // kCancelled (the slot keeps its previous snapshot).
  Result<Run> Prepare(std::span<const int> ids, const std::function<bool()>& cancelled = {});

  int slots() const { return static_cast<int>(slots_.size()); }
  uint64_t snapshot_bytes() const;

 private:
  struct Slot {
    Session* session = nullptr;
    std::unique_ptr<Session> owned;  // null for the engine's own session
    SessionSnapshot snapshot;        // empty = nothing kept
    std::vector<int> tokens;         // the snapshot's tokens (snapshot.position() of them)
    uint64_t last_used = 0;
  };
  SessionPool(Engine& engine) : engine_(engine) {}
  int Usable(const Slot& s, std::span<const int> ids, size_t limit) const;

  Engine& engine_;
  std::vector<Slot> slots_;
  uint64_t clock_ = 0;
};

}  // namespace waste::server
