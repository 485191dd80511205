#include "session_pool.h"

#include <algorithm>

namespace waste::server {

SessionPool::Lease& SessionPool::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    if (slot_ != nullptr) pool_->Give(slot_);
    pool_ = o.pool_;
    slot_ = o.slot_;
    o.slot_ = nullptr;
  }
  return *this;
}

SessionPool::Lease::~Lease() {
  if (slot_ != nullptr) pool_->Give(slot_);
}

Result<std::unique_ptr<SessionPool>> SessionPool::Create(Engine& engine, int slots) {
  std::unique_ptr<SessionPool> pool(new SessionPool(engine));
  pool->slots_.resize(1);
  pool->slots_[0].session = &engine.session();
  for (int i = 1; i < slots; ++i) {
    Result<std::unique_ptr<Session>> s = engine.model().NewSession();
    if (!s) return s.error();
    Slot slot;
    slot.owned = std::move(*s);
    slot.session = slot.owned.get();
    pool->slots_.push_back(std::move(slot));
  }
  // Each slot keeps its restore point as a mark: the model must have room.
  for (Slot& slot : pool->slots_) {
    if (Status marked = slot.session->SetMark(); !marked.ok()) return marked;
  }
  return pool;
}

uint64_t SessionPool::kept_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const Slot& s : slots_) n += s.tokens.size();
  return n;
}

// The mark's length when its tokens start `ids` and it lies within
// `limit`, else 0.
int SessionPool::Usable(const Slot& s, std::span<const int> ids, size_t limit) const {
  if (s.tokens.empty() || s.tokens.size() > limit) return 0;
  if (!std::equal(s.tokens.begin(), s.tokens.end(), ids.begin())) return 0;
  return static_cast<int>(s.tokens.size());
}

SessionPool::Slot* SessionPool::Take(std::span<const int> ids, size_t limit, int* usable) {
  std::lock_guard<std::mutex> lock(mu_);
  Slot* best = nullptr;
  int best_len = 0;
  for (Slot& s : slots_) {
    if (s.held) continue;
    int len = Usable(s, ids, limit);
    if (best == nullptr || len > best_len ||
        (len == best_len && best_len == 0 && s.last_used < best->last_used)) {
      best = &s;
      best_len = len;
    }
  }
  if (best == nullptr) return nullptr;
  best->held = true;
  best->last_used = ++clock_;
  *usable = best_len;
  return best;
}

void SessionPool::Give(Slot* slot) {
  std::lock_guard<std::mutex> lock(mu_);
  slot->held = false;
}

namespace {
Status AllSlotsHeld(int slots) {
  return Status(Errc::kBusy, "all " + std::to_string(slots) +
                                 " conversation slots are in use (--parallel)");
}
}  // namespace

Result<SessionPool::Run> SessionPool::Prepare(std::span<const int> ids,
                                              const std::function<bool()>& cancelled) {
  if (ids.empty()) return ArgError("empty prompt");
  // Reusable positions: one token must stay for the logits, and nothing
  // from the first image pad on (see the header).
  size_t limit = ids.size() - 1;
  if (int pad = engine_.media_pad_id(); pad >= 0) {
    limit = std::min<size_t>(limit, std::find(ids.begin(), ids.end(), pad) - ids.begin());
  }
  int best_len = 0;
  Slot* taken = Take(ids, limit, &best_len);
  if (taken == nullptr) return AllSlotsHeld(slots());
  Run run;
  run.lease = Lease(this, taken);
  Slot& slot = *taken;
  Session& session = *slot.session;
  run.session = &session;
  run.before = session.stats();
  size_t from = 0;
  // A mark is valid while the slot's session has only moved forward since
  // (nothing else resets or restores a pool's session); if it ever is not,
  // the slot starts over.
  if (best_len > 0 && session.RewindToMark().ok()) {
    from = static_cast<size_t>(best_len);
  } else {
    best_len = 0;
    session.Reset();
    std::lock_guard<std::mutex> lock(mu_);
    slot.tokens.clear();
  }
  const size_t point = limit / kChunk * kChunk;
  if (point > from) {
    // Span by span (each starts on a multiple of kChunk, so the chunking and
    // the bits are a single call's), so a client that leaves is noticed and
    // other requests' steps run in between.
    for (size_t at = from; at < point; at += kSpan) {
      if (cancelled && cancelled()) return Status(Errc::kCancelled, "cancelled during prefill");
      Result<std::span<const float>> fed = session.Eval(ids.subspan(at, std::min(kSpan, point - at)));
      if (!fed) return fed.error();
    }
    Status marked = session.SetMark();
    std::lock_guard<std::mutex> lock(mu_);
    if (!marked.ok()) {
      slot.tokens.clear();
      return marked;
    }
    slot.tokens.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(point));
    from = point;
  }
  run.cached_tokens = best_len;
  run.rest = ids.subspan(from);
  return run;
}

Result<SessionPool::Run> SessionPool::PrepareFresh(std::span<const int> ids) {
  // No prefix is usable (limit 0): the least recently used free slot.
  int unused = 0;
  Slot* taken = Take(ids, 0, &unused);
  if (taken == nullptr) return AllSlotsHeld(slots());
  Run run;
  run.lease = Lease(this, taken);
  run.session = taken->session;
  run.before = taken->session->stats();
  taken->session->Reset();
  {
    std::lock_guard<std::mutex> lock(mu_);
    taken->tokens.clear();
  }
  run.rest = ids;
  return run;
}

}  // namespace waste::server
