// Model and Session: one opened container serving many conversations.
//
// A Model owns what is shared and read-only once open: the container and
// its resident trunk, the kernel table, the thread pool, the expert cache
// with its readers, and the tokenizer. A Session owns one conversation:
// the KDA recurrent state and conv rings, the MLA latent cache, the
// position, the forward pass's scratch buffers, the sampler of the current
// Generate call, and its own statistics. Open a model once, then as many
// sessions as its memory budget has room for (Config::max_sessions).
//
// Memory. The budget (Config::ram_budget_bytes) is split at open into the
// trunk, a reserve of max_sessions x (state + scratch at ctx_tokens), and
// the expert cache, which gets the rest. NewSession refuses (kRamBudget)
// a session whose state and scratch would overflow that reserve.
//
// Threading rule. A model runs one session at a time: the calls that run
// the network (Session::Eval, Generate, SaveState, Snapshot, Restore,
// SetMark, RewindToMark, CopyMark, LoadState, Reset) take the model's lock, so
// calling them from several threads at once is safe and they take turns,
// in the order they asked for the lock (a fair hand-over, so concurrent
// streams advance alike); Generate releases the lock while the token
// callback and the prefill callback run (the latter between the prompt's
// spans, unless the prompt holds image pads), so other sessions interleave
// token by token, and a callback may drive other sessions of the same model
// (not its own). The queue of images (AddImage) is the model's, not a
// session's: a host that interleaves sessions queues images for one only
// while no other feeds media pads.
// Everything else is safe from any thread at any time: the model's const
// calls (info, tokenizer, memory_used, stats) and a session's const
// getters while that session is not running.
// One Session object must not be used from two threads at once. Results
// never depend on other sessions: the expert cache changes only what is
// read from disk, never what is computed, so interleaved sessions produce
// the same logits as each alone.
//
// Lifetime. A session keeps its model's shared parts alive: destroying the
// Model while sessions are open is allowed; the container closes with the
// last of them.
//
// Every function is noexcept: failures come back as Status / Result.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "waste/chat.h"
#include "waste/config.h"
#include "waste/image.h"
#include "waste/export.h"
#include "waste/memplan.h"
#include "waste/status.h"
#include "waste/types.h"

namespace waste {

struct ModelCore;    // the shared, read-only-after-open parts (src/engine)
struct SessionCore;  // one conversation's parts (src/engine)
struct SnapshotData;

// A session's state at one moment, held in RAM: KDA state, conv rings, the
// MLA latent rows in use, the position. Immutable; copies are cheap and
// share the data (a host may keep several). Restores into any
// session of the model that took it whose context has room for it.
class WASTE_EXPORT SessionSnapshot {
 public:
  SessionSnapshot() noexcept = default;
  bool empty() const noexcept { return data_ == nullptr; }
  int position() const noexcept;   // tokens the snapshot covers
  uint64_t bytes() const noexcept; // RAM it holds

 private:
  friend class Session;
  explicit SessionSnapshot(std::shared_ptr<const SnapshotData> data) noexcept
      : data_(std::move(data)) {}
  std::shared_ptr<const SnapshotData> data_;
};

struct SessionOptions {
  uint32_t ctx_tokens = 0;  // 0 = the model's Config::ctx_tokens
};

class Session;

class WASTE_EXPORT Model {
 public:
  static Result<std::unique_ptr<Model>> Open(const std::string& container_dir,
                                             const Config& config) noexcept;
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  // kRamBudget when the session's state and scratch do not fit what the
  // budget reserves for sessions (the message says how much is in use).
  Result<std::unique_ptr<Session>> NewSession(const SessionOptions& options = {}) noexcept;

  const ModelInfo& info() const noexcept;
  const MemPlan& plan() const noexcept;  // the plan the budget was resolved with
  // What is allocated; each session's state and scratch as of its last
  // call (a running call's growth shows when it ends), so any thread may ask
  // at any time.
  MemoryUsage memory_used() const noexcept;
  // Expert cache and I/O counters (model-wide) plus the generation totals
  // of every session so far.
  Stats stats() const noexcept;
  std::string backend_name() const noexcept;
  int threads() const noexcept;

  // Tokenizer (kUnsupported when the container has none).
  Result<std::vector<int>> Tokenize(std::string_view text, bool markup, bool add_bos) const noexcept;
  // A prompt built from waste/chat.h segments: each segment encoded on its
  // own in its own mode (markup or plain), the ids concatenated, BOS first
  // if asked.
  Result<std::vector<int>> TokenizeSegments(std::span<const PromptSegment> segments,
                                            bool add_bos) const noexcept;
  Result<std::string> Detokenize(std::span<const int> ids) const noexcept;
  std::string TokenPiece(int id) const noexcept;  // raw bytes, "" when unknown
  // The chat format prompts are built with: the container's chat.json,
  // else the built-in format whose markers are all special tokens of this
  // tokenizer (ChatTemplate::Stock), else nullopt; errors as
  // ChatTemplate::Load's (a chat.json that exists and is bad).
  Result<std::optional<ChatTemplate>> FindChatTemplate() const noexcept;

  // Hotlist (usage.waste, FORMAT.md §9.5); empty path = the configured one.
  Status SaveUsage(const std::string& path = "") const noexcept;

  // --- Images (docs/VISION.md). Need Config::vision at open and a
  // container with a vision tower; otherwise kUnsupported. The queue is the
  // model's: the next Eval/Generate of any session splices it (sessions run
  // one at a time), and that call's end releases it as VISION.md says.
  bool has_vision() const noexcept;
  int media_pad_id() const noexcept;   // -1 without a tower
  Result<int> AddImage(const std::string& path) noexcept;
  Result<int> AddImageBytes(std::span<const uint8_t> bytes, std::string_view name) noexcept;
  Result<std::vector<int>> ExpandImagePads(std::span<const int> ids) const noexcept;
  // The rows (pad positions) an image of this stored size will take, without
  // decoding or encoding it: lets a host check a prompt's length before it
  // queues images (the server validates requests before they wait).
  Result<int> ImageTokens(ImageDimensions size) const noexcept;
  int queued_images() const noexcept;
  void ClearImages() noexcept;

 private:
  explicit Model(std::shared_ptr<ModelCore> core) noexcept;
  std::shared_ptr<ModelCore> core_;
};

class WASTE_EXPORT Session {
 public:
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  int position() const noexcept;       // next absolute position
  uint32_t ctx_tokens() const noexcept;
  // This session's counters: tokens and times, and its own expert traffic
  // (experts_hit, experts_missed, read_waits: what its calls asked of the
  // shared cache; bytes_read and sec_io: the reads that completed, and the
  // read time spent, during its calls — a read-ahead landing between two
  // calls is in the model's figures only); the cache's other figures (evictions, io_*, warm_reads,
  // read-ahead, policy) are the model's. Model::stats() has the traffic of
  // all sessions together.
  Stats stats() const noexcept;
  // Why the last call failed or stopped early, or empty.
  const std::string& error_detail() const noexcept;
  // The expert record the last call failed on (a read error, a short read,
  // a damaged record or checksum mismatch; the failed Status carries the
  // same as Status::failed_expert()), or empty: after a call that succeeded
  // or failed for any other reason. Each Eval/Generate/Restore/Reset clears it.
  std::optional<ExpertFailureInfo> failed_expert() const noexcept;

  // Feeds `ids` at the current position; returns the last position's logits
  // (valid until this session's next call). Prompt must fit:
  // ctx - position >= n.
  Result<std::span<const float>> Eval(std::span<const int> ids) noexcept;
  // Eval that also scores: entry i is log p(ids[i+1] | everything before
  // it), in nats, for i < ids.size() - 1 (perplexity, evaluation). Each
  // position's logits are those Eval would return had the call ended
  // there, from the same prompt pass (one lm_head per position), so
  // scoring n tokens costs a prompt of n tokens, not n decode steps. The
  // state advances as with Eval. With `next` >= 0 (the id that follows
  // `ids`, not fed), one more entry: log p(next | ... ids) — so a long text
  // scored in several calls loses no position; calls split at multiples of
  // 512 tokens give the scores of one call bit for bit.
  Result<std::vector<double>> Score(std::span<const int> ids, int next = -1) noexcept;
  // Score with each position's `top` most likely tokens as well (TokenScore;
  // 0 = none): what an evaluation harness or an API's echoed prompt
  // logprobs need. The same pass and the same log-probabilities as Score.
  Result<std::vector<TokenScore>> ScoreTop(std::span<const int> ids, int top,
                                           int next = -1) noexcept;
  // Prefill + sampling loop (ENGINE.md §7.2). Errors (bad ids, no room for
  // the prompt, I/O) come back as Status; every normal end, cancellation
  // included, as its FinishReason.
  Result<FinishReason> Generate(std::span<const int> prompt, const GenParams& params,
                                const TokenCallback& on_token) noexcept;

  // The state in RAM. Not const: a token emitted by Generate but not yet fed
  // is fed first (a forward pass).
  Result<SessionSnapshot> Snapshot() noexcept;
  // kArg when the snapshot comes from another model or does not fit this
  // session's context; the session is unchanged then.
  Status Restore(const SessionSnapshot& snapshot) noexcept;

  // Rewind points, much cheaper than a snapshot: SetMark copies the
  // recurrent (KDA) state, the position and a token not yet fed, not the
  // attention cache (its rows below the mark stay as they are while the
  // session moves forward). RewindToMark puts the session back there, after
  // a call that was cancelled or failed too, and keeps the mark. `index`
  // picks one of Config::rewind_marks marks (kUnsupported when that is 0,
  // kArg when out of range; the plan counts every copy). Going back to a
  // mark drops the marks that lie further on (the rows past it will be
  // written again); marks at or before it stay. RewindToMark is kArg when
  // that mark was never set, was dropped so, or Reset, Restore or a
  // LoadState that succeeded came after it (those move the session
  // elsewhere); the session is unchanged then.
  Status SetMark(int index = 0) noexcept;
  Status RewindToMark(int index = 0) noexcept;
  // The position mark `index` holds; -1 when it holds none.
  int MarkPosition(int index = 0) const noexcept;
  // Mark `to` becomes a copy of mark `from` (same position, same state):
  // a point kept while `from` is set again further on. kArg when `from`
  // holds none; a copy of a mark is valid exactly as long as one set there.
  Status CopyMark(int from, int to) noexcept;

  // The state as a file in the reference's layout (ENGINE.md §8). Both
  // hold the model's lock only to copy the state (into a buffer of the
  // file's size, or out of one); the file I/O runs while other sessions do.
  Status SaveState(const std::string& path) noexcept;
  // A file saved from another container (its manifest differs) is refused
  // unless `any_container`; files written by the reference name none and load.
  Status LoadState(const std::string& path, bool any_container = false) noexcept;
  void Reset() noexcept;

 private:
  friend class Model;
  explicit Session(std::unique_ptr<SessionCore> core) noexcept;
  std::unique_ptr<SessionCore> core_;
};

}  // namespace waste
