// SessionPool::SaveMarks / LoadMarks: the prompt cache (session_pool.h).
// A restore point costs a prefill of every token before it — minutes for a
// long agent system prompt on a model streaming its experts — so a server
// restart should not throw them away. Each slot's point is kept as the
// engine's own session file (validated on load like any session file:
// shape, container fingerprint, sizes) beside the token ids it covers.
#include <filesystem>
#include <system_error>
#include <vector>

#include "session_pool.h"
#include "state_pair.h"

namespace waste::server {
namespace {

std::string SlotPath(const std::string& dir, size_t i, const char* ext) {
  return (std::filesystem::path(dir) / ("slot-" + std::to_string(i) + ext)).string();
}

}  // namespace

SessionPool::CacheReport SessionPool::SaveMarks(const std::string& dir) {
  CacheReport report;
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    report.skipped.push_back(dir + ": cannot create the directory: " + ec.message());
    return report;
  }
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    const std::string state = SlotPath(dir, i, ".state"), tokens = SlotPath(dir, i, ".tokens.json");
    const std::string name = "slot-" + std::to_string(i);
    if (slot.held) {
      report.skipped.push_back(name + ": a request still runs on it");
      continue;
    }
    // The furthest point: the follow-on's when it has one (after a restart
    // the conversation's next turn is likelier than the same request sent
    // again), else, or when going back there fails, the request's.
    int mark = slot.ahead.empty() ? kRequestMark : kAheadMark;
    if (mark == kAheadMark && !slot.session->RewindToMark(kAheadMark).ok()) mark = kRequestMark;
    const std::vector<int>& kept = mark == kAheadMark ? slot.ahead : slot.tokens;
    // A pair this server could not load (another model's, say) is left as
    // it was unless the slot has a point of its own to put there.
    if (kept.empty() && slot.cache_skipped) continue;
    // The token file goes first and comes back last: a pair is complete
    // only when both are written, and a crash in between leaves a state
    // without tokens (skipped on load), never tokens naming the wrong state.
    RemoveIfThere(tokens);
    if (kept.empty()) {
      RemoveIfThere(state);
      continue;
    }
    Status st = mark == kAheadMark ? Status::Ok() : slot.session->RewindToMark(kRequestMark);
    if (st.ok()) st = slot.session->SaveState(state);
    std::string hash;
    if (st.ok()) {
      hash = FileHash(state);
      if (hash.empty()) st = IoError("cannot read back " + state);
    }
    if (st.ok()) st = WriteTokenFile(tokens, kept, hash);
    if (!st.ok()) {
      report.skipped.push_back(name + ": " + st.ToString());
      continue;
    }
    ++report.conversations;
    report.tokens += kept.size();
  }
  return report;
}

SessionPool::CacheReport SessionPool::LoadMarks(const std::string& dir) {
  CacheReport report;
  const int vocab = engine_.info().vocab;
  const uint32_t ctx = engine_.info().ctx_tokens;
  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < slots_.size(); ++i) {
    Slot& slot = slots_[i];
    const std::string state = SlotPath(dir, i, ".state"), tokens = SlotPath(dir, i, ".tokens.json");
    const std::string name = "slot-" + std::to_string(i);
    std::error_code ec;
    if (!std::filesystem::exists(tokens, ec)) continue;  // nothing kept for this slot
    auto skip = [&](const std::string& why) {
      slot.session->Reset();
      (void)slot.session->SetMark(kRequestMark);  // back to an empty mark, as Create left it
      slot.tokens.clear();
      slot.ahead.clear();
      slot.earlier.clear();
      slot.cache_skipped = true;
      report.skipped.push_back(name + ": " + why);
    };
    Result<TokenFile> file = ReadTokenFile(tokens, vocab, ctx);
    if (!file) {
      skip(file.error().message());
      continue;
    }
    const std::vector<int>& ids = file->ids;
    if (FileHash(state) != file->state_hash) {
      skip(state + " is not the state " + tokens + " was saved with (missing, or another save's)");
      continue;
    }
    if (ids.empty() || ids.size() % kChunk != 0 || ids.size() >= ctx) {
      skip(tokens + ": " + std::to_string(ids.size()) +
           " tokens is not a restore point (a positive multiple of " + std::to_string(kChunk) +
           " below the context, " + std::to_string(ctx) + ")");
      continue;
    }
    if (Status st = slot.session->LoadState(state); !st.ok()) {
      skip(st.ToString());
      continue;
    }
    if (slot.session->position() != static_cast<int>(ids.size())) {
      skip(state + " holds " + std::to_string(slot.session->position()) + " positions but " +
           tokens + " lists " + std::to_string(ids.size()) + " tokens");
      continue;
    }
    if (Status st = slot.session->SetMark(kRequestMark); !st.ok()) {
      skip(st.ToString());
      continue;
    }
    slot.tokens = std::move(file->ids);
    slot.ahead.clear();
    slot.earlier.clear();  // the load moved the session: its marks are gone
    ++report.conversations;
    report.tokens += slot.tokens.size();
  }
  return report;
}

}  // namespace waste::server
