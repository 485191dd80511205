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

Result<std::unique_ptr<SessionPool>> SessionPool::Create(Engine& engine, int slots,
                                                        bool follow_on, int earlier_points) {
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
  // Each slot keeps its restore points as marks: the model must have room
  // (set here, so the memory is taken at start-up as the plan says).
  const int marks = static_cast<int>(engine.model().plan().marks_per_session);
  pool->follows_on_ = follow_on && marks >= kMarks;
  pool->first_earlier_ = pool->follows_on_ ? kMarks : kAheadMark;
  pool->earlier_marks_ = std::clamp(marks - pool->first_earlier_, 0, std::max(0, earlier_points));
  for (Slot& slot : pool->slots_) {
    for (int m = kRequestMark; m < pool->first_earlier_ + pool->earlier_marks_; ++m) {
      if (Status marked = slot.session->SetMark(m); !marked.ok()) return marked;
    }
  }
  return pool;
}

uint64_t SessionPool::kept_tokens() const {
  std::lock_guard<std::mutex> lock(mu_);
  uint64_t n = 0;
  for (const Slot& s : slots_) n += std::max(s.tokens.size(), s.ahead.size());
  return n;
}

namespace {
bool Starts(const std::vector<int>& point, std::span<const int> ids, size_t limit) {
  return !point.empty() && point.size() <= limit &&
         std::equal(point.begin(), point.end(), ids.begin());
}
}  // namespace

int SessionPool::Usable(const Slot& s, std::span<const int> ids, size_t limit, int* mark) const {
  for (int m : {kAheadMark, kRequestMark}) {
    const std::vector<int>& point = m == kAheadMark ? s.ahead : s.tokens;
    if (Starts(point, ids, limit)) {
      *mark = m;
      return static_cast<int>(point.size());
    }
  }
  // The earlier points are prefixes of `tokens`: the longest that `ids`
  // starts with.
  if (s.earlier.empty()) return 0;
  const size_t shared =
      std::mismatch(s.tokens.begin(), s.tokens.begin() + static_cast<std::ptrdiff_t>(
                                                              std::min(s.tokens.size(), ids.size())),
                    ids.begin())
          .first -
      s.tokens.begin();
  int best = 0;
  for (const Slot::Earlier& e : s.earlier) {
    if (e.length > 0 && e.length <= std::min(shared, limit) && static_cast<int>(e.length) > best) {
      best = static_cast<int>(e.length);
      *mark = e.mark;
    }
  }
  return best;
}

void SessionPool::KeepEarlier(Slot& slot, bool shared) {
  if (earlier_marks_ == 0) return;
  size_t length = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    length = slot.tokens.size();
    if (length == 0) return;
    for (Slot::Earlier& e : slot.earlier) {
      if (e.length == length) {  // kept already
        e.shared = e.shared || shared;
        return;
      }
    }
  }
  if (slot.session->MarkPosition(kRequestMark) != static_cast<int>(length)) return;
  // A free mark, else the oldest point's.
  int mark = -1;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int m = first_earlier_; m < first_earlier_ + earlier_marks_ && mark < 0; ++m) {
      if (std::none_of(slot.earlier.begin(), slot.earlier.end(),
                       [m](const Slot::Earlier& e) { return e.mark == m; })) {
        mark = m;
      }
    }
    if (mark < 0) {
      // The oldest point that is not a shared prefix's, else the oldest.
      auto victim = std::find_if(slot.earlier.begin(), slot.earlier.end(),
                                 [](const Slot::Earlier& e) { return !e.shared; });
      if (victim == slot.earlier.end()) victim = slot.earlier.begin();
      mark = victim->mark;
      slot.earlier.erase(victim);
    }
  }
  if (!slot.session->CopyMark(kRequestMark, mark).ok()) return;
  std::lock_guard<std::mutex> lock(mu_);
  slot.earlier.push_back({mark, length, shared});
}

void SessionPool::MarkShared(Slot& slot, std::span<const int> ids, size_t at, size_t limit) {
  // The point the request mark leaves stays as an earlier one, as below.
  if (slot.tokens.size() < at) KeepEarlier(slot);
  if (!slot.session->SetMark(kRequestMark).ok()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot.tokens.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(at));
    slot.ahead.clear();
  }
  if (store_ != nullptr) (void)store_->Put(*slot.session, slot.tokens, ids.first(limit));
}

void SessionPool::DropEarlierPast(Slot& slot, size_t at) {
  std::lock_guard<std::mutex> lock(mu_);
  std::erase_if(slot.earlier, [at](const Slot::Earlier& e) { return e.length > at; });
}

// What a slot that is following on will hold of `ids`: its points, or the
// chunks of its guess that `ids` starts with.
int SessionPool::Promised(const Slot& s, std::span<const int> ids, size_t limit) const {
  int m = kRequestMark;
  const int now = Usable(s, ids, limit, &m);
  const size_t n = std::min({s.guess.size(), ids.size(), limit});
  const size_t shared =
      std::mismatch(s.guess.begin(), s.guess.begin() + static_cast<std::ptrdiff_t>(n), ids.begin()).first -
      s.guess.begin();
  return std::max(now, static_cast<int>(shared / kChunk * kChunk));
}

SessionPool::Slot* SessionPool::Take(std::span<const int> ids, size_t limit, int* usable, int* mark) {
  std::unique_lock<std::mutex> lock(mu_);
  Slot* best = nullptr;
  int best_len = 0, best_mark = kRequestMark;
  while (true) {
    best = nullptr;
    best_len = 0;
    for (Slot& s : slots_) {
      if (s.held) continue;
      int m = kRequestMark;
      int len = Usable(s, ids, limit, &m);
      if (best == nullptr || len > best_len ||
          (len == best_len && best_len == 0 && s.last_used < best->last_used)) {
        best = &s;
        best_len = len;
        best_mark = m;
      }
    }
    // A slot reserved for its follow-on is waited for when it holds (or
    // will) more of this prompt than any free slot, most likely because it
    // is this conversation's, or when no slot is free; the follow-on gives
    // way at its next span boundary once this request runs.
    const bool wait = std::any_of(slots_.begin(), slots_.end(), [&](const Slot& s) {
      return s.following_on && (best == nullptr || Promised(s, ids, limit) > best_len);
    });
    if (!wait) break;
    follow_on_done_.wait(lock);
  }
  if (best == nullptr) return nullptr;
  best->held = true;
  best->last_used = ++clock_;
  *usable = best_len;
  *mark = best_mark;
  return best;
}

void SessionPool::Give(Slot* slot) {
  bool was_following_on = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot->held = false;
    was_following_on = slot->following_on;
    slot->following_on = false;
    slot->guess.clear();
  }
  if (was_following_on) follow_on_done_.notify_all();
}

namespace {
Status AllSlotsHeld(int slots) {
  return Status(Errc::kBusy, "all " + std::to_string(slots) +
                                 " conversation slots are in use (--parallel)");
}
}  // namespace

Result<SessionPool::Run> SessionPool::Prepare(std::span<const int> ids,
                                              const std::function<bool()>& cancelled,
                                              size_t shared) {
  if (ids.empty()) return ArgError("empty prompt");
  // Reusable positions: one token must stay for the logits, and nothing
  // from the first image pad on.
  const size_t limit = BeforeFirstPad(ids, ids.size() - 1);
  int best_len = 0, mark = kRequestMark;
  Slot* taken = Take(ids, limit, &best_len, &mark);
  if (taken == nullptr) return AllSlotsHeld(slots());
  Run run;
  run.lease = Lease(this, taken);
  Slot& slot = *taken;
  Session& session = *slot.session;
  run.session = &session;
  run.before = session.stats();
  if (store_ != nullptr) {
    // A conversation no slot holds may be in the store: loaded back when it
    // gives more than this slot does.
    const bool load = static_cast<size_t>(best_len) < limit / kChunk * kChunk &&
                      store_->Longest(ids, limit) > static_cast<size_t>(best_len);
    // The slot's own point is stored before it goes: when it starts over
    // (whatever this prompt's length) or takes a stored one.
    if (load || best_len == 0) Spill(slot, ids, limit);
    std::vector<int> loaded;
    if (load && store_->LoadLongest(ids, limit, session, &loaded).ok()) {
      DropEarlierPast(slot, 0);  // the load moved the session: its marks are gone
      if (session.SetMark(kRequestMark).ok()) {
        best_len = static_cast<int>(loaded.size());
        mark = kRequestMark;
        run.restored = true;
        std::lock_guard<std::mutex> lock(mu_);
        slot.tokens = std::move(loaded);
        slot.ahead.clear();
      } else {
        best_len = 0;  // the loaded state is not a point: reset below
      }
    }
    // A failed load left the session as it was: the slot's own point (if
    // it starts this prompt) is still good, and the rewind below says so.
    // Going back to an earlier point gives up the slot's furthest point
    // (another conversation on the same system prompt, an edited turn):
    // stored first, as when the slot starts over.
    if (!load && best_len > 0 && IsEarlierMark(mark)) Spill(slot, ids, limit);
  }
  size_t from = 0;
  // A mark is valid while the slot's session has only moved forward since
  // (nothing else resets or restores a pool's session); if it ever is not,
  // the slot starts over.
  const bool earlier = IsEarlierMark(mark);
  if (best_len > 0 && session.RewindToMark(mark).ok()) {
    from = static_cast<size_t>(best_len);
    // Going back to the request's mark dropped the follow-on's further on;
    // to an earlier point, the request's too (set again below).
    // The request's mark is put there too at once (a copy), so that a
    // prefill stopped before its end still leaves the slot a valid point.
    const bool request_here = earlier && session.CopyMark(mark, kRequestMark).ok();
    if (mark == kRequestMark || earlier) {
      std::lock_guard<std::mutex> lock(mu_);
      slot.ahead.clear();
      if (earlier) slot.tokens.resize(request_here ? from : 0);
    }
    DropEarlierPast(slot, from);
  } else {
    best_len = 0;
    mark = kRequestMark;
    session.Reset();
    DropEarlierPast(slot, 0);
    std::lock_guard<std::mutex> lock(mu_);
    slot.tokens.clear();
    slot.ahead.clear();
  }
  const size_t point = limit / kChunk * kChunk;
  // The shared prefix's point, when this prefill reaches it (see the header).
  const size_t shared_point = std::min(shared, point) / kChunk * kChunk;
  const bool mark_shared = KeepsSharedPoints() && shared_point > from;
  // Resumed from the follow-on's point: the request's mark moves there (or
  // further), so a follow-on after this reply starts from it.
  if (point > from || mark != kRequestMark) {
    // Span by span (each starts on a multiple of kChunk, so the chunking and
    // the bits are a single call's), so a client that leaves is noticed and
    // other requests' steps run in between.
    size_t at = from;
    auto feed_to = [&](size_t end) -> Status {
      for (; at < end; at += std::min(kSpan, end - at)) {
        if (cancelled && cancelled()) return Status(Errc::kCancelled, "cancelled during prefill");
        Result<std::span<const float>> fed =
            session.Eval(ids.subspan(at, std::min(kSpan, end - at)));
        if (!fed) return fed.error();
      }
      return Status::Ok();
    };
    if (mark_shared && shared_point < point) {
      WASTE_TRY(feed_to(shared_point));
      MarkShared(slot, ids, shared_point, limit);
    }
    WASTE_TRY(feed_to(point));
    // The point the request's mark leaves stays as an earlier one (the
    // shared prefix's, given up last).
    if (slot.tokens.size() < point) {
      KeepEarlier(slot, shared_point > 0 && slot.tokens.size() == shared_point);
    }
    Status marked = session.SetMark(kRequestMark);
    std::lock_guard<std::mutex> lock(mu_);
    slot.ahead.clear();
    if (!marked.ok()) {
      slot.tokens.clear();
      return marked;
    }
    slot.tokens.assign(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(point));
    from = point;
  }
  // The request's own point is the shared prefix's: stored as such (the
  // next turn keeps it as a shared earlier point: Usable finds it there).
  if (mark_shared && shared_point == point && store_ != nullptr) {
    (void)store_->Put(session, slot.tokens, ids.first(limit));
  }
  run.cached_tokens = best_len;
  run.resumed_ahead = best_len > 0 && mark == kAheadMark && !earlier;
  run.resumed_earlier = best_len > 0 && earlier;
  run.rest = ids.subspan(from);
  run.rest_at_mark = from > 0;  // the mark set (or rewound to) at `from` above
  return run;
}

Status SessionPool::Restart(Run& run) {
  if (run.rest_at_mark) return run.session->RewindToMark(kRequestMark);
  run.session->Reset();  // nothing before `rest`: no mark was set (the slot keeps none)
  return Status::Ok();
}

Result<SessionPool::Run> SessionPool::PrepareFresh(std::span<const int> ids) {
  // No prefix is usable (limit 0): the least recently used free slot.
  int unused = 0, no_mark = 0;
  Slot* taken = Take(ids, 0, &unused, &no_mark);
  if (taken == nullptr) return AllSlotsHeld(slots());
  Run run;
  run.lease = Lease(this, taken);
  run.session = taken->session;
  run.before = taken->session->stats();
  if (store_ != nullptr) Spill(*taken, {}, 0);
  taken->session->Reset();
  DropEarlierPast(*taken, 0);
  {
    std::lock_guard<std::mutex> lock(mu_);
    taken->tokens.clear();
    taken->ahead.clear();
  }
  run.rest = ids;
  return run;
}

void SessionPool::Spill(Slot& slot, std::span<const int> ids, size_t limit) {
  std::vector<int> point, request_point;
  int mark = kRequestMark;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!slot.ahead.empty()) mark = kAheadMark;
    point = mark == kAheadMark ? slot.ahead : slot.tokens;
    request_point = slot.tokens;
  }
  if (point.empty() || Starts(point, ids, limit)) return;
  if (!slot.session->RewindToMark(mark).ok()) {
    // The follow-on's point could not be gone back to: the request's may.
    if (mark == kRequestMark || request_point.empty() ||
        !slot.session->RewindToMark(kRequestMark).ok()) {
      return;
    }
    point = std::move(request_point);
  }
  // A point that cannot be stored (disk full, say) is lost as it was
  // before there was a store; the request goes on either way.
  (void)store_->Put(*slot.session, point, ids);
}

size_t SessionPool::BeforeFirstPad(std::span<const int> ids, size_t limit) const {
  if (int pad = engine_.media_pad_id(); pad >= 0) {
    limit = std::min<size_t>(limit, std::find(ids.begin(), ids.end(), pad) - ids.begin());
  }
  return limit;
}

std::shared_ptr<SessionPool::FollowOn> SessionPool::ReserveFollowOn(Run& run) {
  if (!follows_on_ || run.lease.slot_ == nullptr) return nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    run.lease.slot_->following_on = true;
  }
  auto reserved = std::make_shared<FollowOn>();
  reserved->lease = std::move(run.lease);
  return reserved;
}

int SessionPool::RunFollowOn(std::shared_ptr<FollowOn> reserved, std::span<const int> next,
                             const std::function<bool()>& stop) {
  if (!reserved || reserved->lease.slot_ == nullptr) return 0;
  Slot& slot = *reserved->lease.slot_;
  Session& session = *slot.session;
  // The next request's prompt is longer than `next` (a message follows),
  // so any chunk boundary within it can be that request's restore point;
  // none from the first image pad on.
  const size_t limit = BeforeFirstPad(next, next.size());
  const size_t point = limit / kChunk * kChunk;
  // From the request's point when the guess starts with it. When it does
  // not (the prompt ended in a system note, as response_format and
  // tool_choice add after the messages, so its point lies past where the
  // next turn differs), from the start: the point is of no use to the next
  // turn, only to the same request sent again.
  size_t from = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (Starts(slot.tokens, next, limit)) from = slot.tokens.size();
  }
  if (point <= from || (stop && stop())) return 0;
  if (from == 0) {
    session.Reset();
    DropEarlierPast(slot, 0);
  } else if (!session.RewindToMark(kRequestMark).ok()) {
    return 0;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    slot.ahead.clear();  // gone with the rewind, if it was set
    if (from == 0) slot.tokens.clear();  // and the request's point with the reset
    // What a request arriving meanwhile may wait for (Take).
    slot.guess.assign(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(point));
  }
  size_t reached = from;
  while (reached < point) {
    if (reached > from && stop && stop()) break;
    Result<std::span<const float>> fed =
        session.Eval(next.subspan(reached, std::min(kSpan, point - reached)));
    if (!fed) return static_cast<int>(reached - from);  // past the request's mark: harmless
    reached += std::min(kSpan, point - reached);
  }
  if (!session.SetMark(kAheadMark).ok()) return static_cast<int>(reached - from);
  std::lock_guard<std::mutex> lock(mu_);
  slot.ahead.assign(next.begin(), next.begin() + static_cast<std::ptrdiff_t>(reached));
  return static_cast<int>(reached - from);
}

std::span<const int> PrefixBefore(std::span<const int> ids, std::span<const int> rest) {
  if (rest.size() > ids.size() || rest.data() != ids.data() + (ids.size() - rest.size())) return {};
  return ids.first(ids.size() - rest.size());
}

}  // namespace waste::server
