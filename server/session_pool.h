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
// Follow-on prefill. The next request of a conversation resends it with
// the reply appended, and that reply lies past the request's restore point:
// it would be prefilled again, as history, when the user has already typed
// the next message. So after a reply, while nobody else waits, the slot
// prefills the conversation as the next request will most likely render it
// (FollowOn) from its restore point, in the same chunks, and keeps a
// second mark (kAheadMark) at the last chunk boundary of that guess. A
// request whose prompt starts with those tokens resumes there; one that
// does not (the client changed the reply, dropped its reasoning, ...)
// resumes from the request's own mark as before. Both are bit-identical to
// a prefill from scratch. A pool over a model with one mark per session
// does not follow on.
//
// Concurrency. Requests run at once (server/engine_worker.h), each on a
// slot of its own: a Run holds its slot until it is destroyed, and Prepare
// chooses among the free slots only (the longest usable prefix among them,
// else the least recently used). A request waits for a slot reserved for
// or running its follow-on when that slot holds, or is prefilling, more of
// its prompt than any free slot (its own conversation, most likely), or
// when no slot is free. The follow-on stops at its next span boundary when
// its `stop` says so (the server: any other request waits or runs) and
// keeps what it reached. Thread-safe.
//
// Earlier points (`waste serve --earlier-points N`, marks beyond kMarks):
// when a request moves its slot's restore point further on, the point it
// leaves is kept as a copy (Session::CopyMark), up to N per slot, the
// oldest given up first. They all lie on the slot's one history (each a
// prefix of `tokens`), so a request that changes an earlier turn (an edit
// of a message, a regenerated reply further back) resumes from the last of
// them before the change instead of from position 0. Going back to one
// drops those further on (Session::RewindToMark), as a reset drops all.
//
// Shared-prefix points: a chat's system prompt and tool declarations are
// what other conversations start with too (an agent's every task, a
// client's every new chat). Prepare is told how many leading tokens those
// are (SharedPrefixLength, follow_on.h); when its prefill crosses the last chunk
// boundary within them, the point there is kept as an earlier point that
// the turns after it do not push out (while another earlier mark is
// spare), and stored with a PointStore, so a new conversation with the
// same system prompt resumes there, on this slot or, loaded, on any.
//
// Spilled points (with a PointStore, `--prompt-cache DIR`): before a slot
// is reset for a prompt its point does not start (or PrepareFresh resets
// it), its furthest point is stored; a request whose prompt starts with a
// stored point longer than its slot's has that point loaded into the slot
// (point_store.h). Both run on the request's own slot, before its prefill.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "point_store.h"
#include "waste/waste.h"

namespace waste::server {

class SessionPool {
 public:
  static constexpr int kChunk = kPrefillChunkTokens;  // the engine's prefill chunk (see above)
  // Restored prefill is fed in spans (waste/types.h): fewer expert reads,
  // the same bits; a client that leaves is noticed between spans.
  static constexpr size_t kSpan = kPrefillSpanTokens;
  // The session's marks: the request's restore point, and the follow-on's
  // point ahead of it. `waste serve` opens the model with kMarks per session.
  static constexpr int kRequestMark = 0, kAheadMark = 1, kMarks = 2;

  // `slots` sessions: the engine's own plus slots-1 new ones. kRamBudget
  // when the plan has no room for them (Config::max_sessions); kUnsupported
  // when the engine was opened without Config::rewind_marks. Follows on
  // when `follow_on` and the model keeps kMarks per session. Keeps up to
  // `earlier_points` earlier points per slot in the marks after those (as
  // many as the model keeps: RewindMarksFor in http_server.h counts them).
  static Result<std::unique_ptr<SessionPool>> Create(Engine& engine, int slots,
                                                     bool follow_on = true,
                                                     int earlier_points = 0);

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
    friend class SessionPool;
    SessionPool* pool_ = nullptr;
    Slot* slot_ = nullptr;
  };

  struct Run {
    Session* session = nullptr;
    int cached_tokens = 0;   // prompt tokens rewound to instead of prefilled
    bool resumed_ahead = false;  // ... to the follow-on's point (kAheadMark)
    bool restored = false;       // ... to a point loaded from the store (UseStore)
    bool resumed_earlier = false;  // ... to one of the slot's earlier points
    std::span<const int> rest;  // what Generate must still be given
    bool rest_at_mark = false;  // the session's kRequestMark is where `rest` starts
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
  // past it). kBusy when every slot is held. `shared`: how many leading
  // tokens of `ids` other conversations likely share (the header's
  // "Shared-prefix points"); 0 = none.
  Result<Run> Prepare(std::span<const int> ids, const std::function<bool()>& cancelled = {},
                      size_t shared = 0);
  // Whether Prepare does anything with `shared` (earlier points or a
  // store): the caller may skip working it out otherwise.
  bool KeepsSharedPoints() const { return earlier_marks_ > 0 || store_ != nullptr; }
  // A free slot reset to position 0 with nothing fed (the least recently
  // used one; it keeps no restore point): for a request that needs every
  // prompt position computed, such as one scoring its prompt. `rest` is all
  // of ids. kBusy when every slot is held.
  Result<Run> PrepareFresh(std::span<const int> ids);

  // Puts `run`'s session back where `rest` starts, for another completion
  // of the same prompt (`n` > 1): its restore point (the request's mark),
  // else position 0 (nothing of the prompt was fed before `rest`). Feeding
  // `rest` again then gives the bits it gave the first time.
  Status Restart(Run& run);

  // After a reply: keeps `run`'s slot held for its follow-on prefill and
  // makes requests that would take a slot wait until it is done (or
  // given up: destroying the result without running it frees the slot).
  // Null when the pool does not follow on (one mark per session).
  struct FollowOn {
    Lease lease;  // the reserved slot, held until this goes
  };
  std::shared_ptr<FollowOn> ReserveFollowOn(Run& run);
  // Prefills `next` (the tokens the conversation's next request most likely
  // starts with) from the slot's restore point up to its last chunk boundary
  // (and before its first image pad), span by span, asking `stop` before
  // each; marks the point reached (kAheadMark). Returns the tokens fed.
  // When the slot's restore point does not start `next` (the prompt ended
  // in a system note the next turn puts later) it starts from position 0,
  // and the slot loses that point. Frees the slot.
  int RunFollowOn(std::shared_ptr<FollowOn> reserved, std::span<const int> next,
                  const std::function<bool()>& stop);

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

  // Spill restore points to `store` and load them back (see above). Call
  // before serving; the pool owns it from then on.
  void UseStore(std::unique_ptr<PointStore> store) { store_ = std::move(store); }
  const PointStore* store() const { return store_.get(); }

  int slots() const { return static_cast<int>(slots_.size()); }
  // Prompt tokens the slots' restore points cover (each slot's furthest),
  // all slots together.
  uint64_t kept_tokens() const;
  // The model's image queue is one for all sessions (include/waste/model.h):
  // a request that queues images, or feeds media pads, holds this from
  // clearing the queue until its generation ends.
  std::mutex& image_queue() { return images_mu_; }

  struct Slot {
    Session* session = nullptr;
    std::unique_ptr<Session> owned;  // null for the engine's own session
    std::vector<int> tokens;         // the tokens up to kRequestMark; empty = none kept
    // The tokens up to kAheadMark (the follow-on's point: they start with
    // `tokens` and go further); empty = none.
    std::vector<int> ahead;
    // Earlier restore points, oldest first: a mark and the length of the
    // prefix of `tokens` it holds (see the header).
    struct Earlier {
      int mark = 0;
      size_t length = 0;
      bool shared = false;  // a shared prefix's point: given up last
    };
    std::vector<Earlier> earlier;
    uint64_t last_used = 0;
    bool held = false;               // a request is using it (under mu_)
    bool following_on = false;       // reserved for or running its follow-on (under mu_)
    std::vector<int> guess;          // while it runs: the tokens it prefills towards (under mu_)
    bool cache_skipped = false;      // LoadMarks found a pair it could not use
  };

 private:
  SessionPool(Engine& engine) : engine_(engine) {}
  // The longest of the slot's restore points that starts `ids` and lies
  // within `limit` (its mark in *mark), else 0.
  int Usable(const Slot& s, std::span<const int> ids, size_t limit, int* mark) const;
  // Marks and returns the free slot with the longest usable prefix of `ids`
  // within `limit` (its length in *usable, its mark in *mark), else the
  // least recently used free one; null when every slot is held. Waits for
  // a slot reserved for its follow-on that promises more of `ids` than any
  // free slot, or when only such slots are left.
  Slot* Take(std::span<const int> ids, size_t limit, int* usable, int* mark);
  int Promised(const Slot& s, std::span<const int> ids, size_t limit) const;
  // `limit` cut to the position of the first image pad in `ids` (no restore
  // point lies past one, see the header).
  size_t BeforeFirstPad(std::span<const int> ids, size_t limit) const;
  void Give(Slot* slot);
  // Stores the furthest point of `slot` (held by the caller) unless it
  // starts `ids` within `limit` (the request continues from it); stored
  // points that start `ids` are not evicted for it.
  void Spill(Slot& slot, std::span<const int> ids, size_t limit);
  // Before the slot's request mark is set further on: keeps the point it
  // holds as an earlier one (held by the caller; the session is at or past
  // that point on the same history). A `shared` point (a shared prefix's)
  // is given up only when no other earlier point can be.
  void KeepEarlier(Slot& slot, bool shared = false);
  // Prepare's prefill reached the shared prefix's point (the session stands
  // there): makes it the request mark, to be kept as a shared earlier point
  // when the prefill goes on, and stores it with a store.
  void MarkShared(Slot& slot, std::span<const int> ids, size_t at, size_t limit);
  // The slot's session went back to position `at`: earlier points past it
  // are gone (0: a reset, all are).
  void DropEarlierPast(Slot& slot, size_t at);
  bool IsEarlierMark(int mark) const { return earlier_marks_ > 0 && mark >= first_earlier_; }

  Engine& engine_;
  std::vector<Slot> slots_;
  mutable std::mutex mu_;  // slots' `tokens`, `ahead`, `last_used`, `held`, `following_on`; clock_
  std::condition_variable follow_on_done_;  // a slot's following_on went false
  uint64_t clock_ = 0;
  bool follows_on_ = false;  // the model keeps kMarks per session
  // The marks kept for earlier points: first_earlier_ .. + earlier_marks_ - 1.
  int first_earlier_ = kMarks;
  int earlier_marks_ = 0;
  std::mutex images_mu_;
  std::unique_ptr<PointStore> store_;
};

// The prompt's tokens before `rest` (the part a restore point spared
// feeding): what drafting may quote besides `rest` itself
// (GenParams::draft_context). Empty when `rest` is not a tail of `ids`.
std::span<const int> PrefixBefore(std::span<const int> ids, std::span<const int> rest);

}  // namespace waste::server
