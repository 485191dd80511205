// Spilled restore points: the prompt cache's store of conversations that
// no slot holds (`waste serve --prompt-cache DIR`, bounded by
// `--prompt-cache-size`). A slot keeps one conversation's restore point
// (session_pool.h); with one slot, a user switching between two chats, or
// an agent alternating between two sub-agents, used to prefill the whole
// conversation again at every switch — minutes on a model that streams its
// experts. So before a slot is given to another conversation its point is
// written here (the engine's session file at the point, beside the tokens
// it covers: server/state_pair.h), and a request whose prompt starts with
// a stored point longer than any slot offers has it loaded back into its
// slot. A loaded state is the one saved (same build, same backend), so the
// reply is bit-identical to a prefill from scratch, as with a slot's own
// point.
//
// Files: point-<16 hex digits>.state and point-<same>.tokens.json in DIR,
// the digits an FNV-1a hash of the tokens. The least recently used points
// are removed once all of them take more than the size limit. Files this
// store did not index (other names, token files it cannot read: another
// model's, damaged ones) are never touched; a point of ours that fails to
// load is removed, and so is a state that no token file names (a save cut
// short). Thread-safe; the file I/O runs outside the store's lock, and the
// session calls hold the model only to copy the state.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "waste/waste.h"

namespace waste::server {

class PointStore {
 public:
  struct Options {
    std::string dir;
    uint64_t max_bytes = 0;  // states and token files together
    int vocab = 0;           // token files naming other ids are not this model's
    uint32_t ctx = 0;        // ... nor those at or past the context
    int chunk = kPrefillChunkTokens;  // a point lies on a multiple of it
  };
  // Indexes the points already in `dir` (created if missing). Their
  // states are checked when loaded, not here (a start-up reads no state).
  // kIo when the directory cannot be created or listed.
  static Result<std::unique_ptr<PointStore>> Open(const Options& options);

  // The length of the longest stored point that starts `ids` and lies
  // within `limit` tokens; 0 when none does.
  size_t Longest(std::span<const int> ids, size_t limit) const;
  // Loads the longest such point into `session` and puts its tokens in
  // *tokens. A point that fails (its state missing, damaged, of another
  // container, not the state its token file names) is removed and the
  // error returned; the session is then unchanged, marks included, unless
  // the state loaded but held another position (its marks are gone then:
  // RewindToMark says so).
  Status LoadLongest(std::span<const int> ids, size_t limit, Session& session,
                     std::vector<int>* tokens);
  // Stores `session` as the point after `tokens` (the session must stand
  // there: position == tokens.size()). The same tokens stored already are
  // only marked as used. Then removes the least recently used points past
  // the size limit, except those that start `keep` (what the caller is
  // about to load); a point that does not fit beside those is not kept
  // (and nothing is removed for it).
  Status Put(Session& session, const std::vector<int>& tokens, std::span<const int> keep = {});

  struct Counts {
    uint64_t points = 0, bytes = 0;      // held now
    uint64_t stored = 0, loaded = 0;     // since open
    uint64_t evicted = 0, failed = 0;    // removed for room; dropped on a failed load
  };
  Counts counts() const;
  const std::string& dir() const { return options_.dir; }

 private:
  struct Point {
    std::string key;          // the hash in the file names
    std::vector<int> tokens;
    std::string state_hash;   // FNV-1a of the state file, from the token file
    uint64_t bytes = 0;
    uint64_t last_used = 0;
  };
  explicit PointStore(const Options& options) : options_(options) {}
  std::string PathOf(const std::string& key, const char* ext) const;
  // The longest point that starts `ids` within `limit` (under mu_); null if none.
  Point* LongestLocked(std::span<const int> ids, size_t limit);
  void Drop(size_t index);  // and its files; under mu_
  void Touch(const std::string& key) const;    // marks a use on disk
  void EvictLocked(std::span<const int> keep, const std::string& spare);

  Options options_;
  mutable std::mutex mu_;
  std::vector<Point> points_;
  std::set<std::string> writing_;  // keys a Put is writing now
  uint64_t clock_ = 0;
  Counts counts_;
};

}  // namespace waste::server
