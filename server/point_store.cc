#include "point_store.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

#include "state_pair.h"

namespace waste::server {
namespace {

constexpr const char kPrefix[] = "point-";  // then 16 hex digits, then one of:
constexpr const char kTokensExt[] = ".tokens.json";
constexpr const char kStateExt[] = ".state";

std::string TokensKey(const std::vector<int>& tokens) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (int id : tokens) {
    for (int b = 0; b < 4; ++b) {
      h = (h ^ ((static_cast<uint32_t>(id) >> (8 * b)) & 0xffu)) * 0x100000001b3ull;
    }
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

bool Starts(const std::vector<int>& point, std::span<const int> ids, size_t limit) {
  return !point.empty() && point.size() <= std::min(limit, ids.size()) &&
         std::equal(point.begin(), point.end(), ids.begin());
}

uint64_t SizeOr0(const std::string& path) {
  std::error_code ec;
  const uintmax_t n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<uint64_t>(n);
}

}  // namespace

std::string PointStore::PathOf(const std::string& key, const char* ext) const {
  return (std::filesystem::path(options_.dir) / (kPrefix + key + ext)).string();
}

Result<std::unique_ptr<PointStore>> PointStore::Open(const Options& options) {
  std::unique_ptr<PointStore> store(new PointStore(options));
  std::error_code ec;
  std::filesystem::create_directories(options.dir, ec);
  if (ec) return IoError(options.dir + ": cannot create the prompt cache directory: " + ec.message());
  struct Found {
    Point point;
    std::filesystem::file_time_type written;
  };
  std::vector<Found> found;
  std::vector<std::string> orphans;  // point states no token file names
  std::filesystem::directory_iterator it(options.dir, ec), end;
  if (ec) return IoError(options.dir + ": cannot list the prompt cache directory: " + ec.message());
  for (; it != end; it.increment(ec)) {
    if (ec) return IoError(options.dir + ": cannot list the prompt cache directory: " + ec.message());
    try {  // a name the platform cannot convert (Windows) is not ours
      const std::string name = it->path().filename().string();
      if (name.rfind(kPrefix, 0) != 0) continue;
      const std::string key = name.substr(sizeof kPrefix - 1, 16);
      const std::string ext = name.substr(std::min(name.size(), sizeof kPrefix - 1 + 16));
      if (key.size() != 16 || key.find_first_not_of("0123456789abcdef") != std::string::npos) continue;
      if (ext == kStateExt) {
        if (!std::filesystem::exists(store->PathOf(key, kTokensExt), ec)) orphans.push_back(it->path().string());
        continue;
      }
      if (ext != kTokensExt) continue;
      Found f;
      f.point.key = key;
      Result<TokenFile> file = ReadTokenFile(it->path().string(), options.vocab, options.ctx);
      // Not this model's, or damaged: left alone (never indexed, never removed).
      if (!file) continue;
      const size_t n = file->ids.size();
      if (n == 0 || n % static_cast<size_t>(options.chunk) != 0 || n >= options.ctx) continue;
      if (TokensKey(file->ids) != key) continue;
      f.point.bytes = SizeOr0(store->PathOf(key, kStateExt));
      if (f.point.bytes == 0) continue;  // its state is missing: fails at load, not counted
      f.point.bytes += SizeOr0(it->path().string());
      f.point.tokens = std::move(file->ids);
      f.point.state_hash = std::move(file->state_hash);
      f.written = it->last_write_time(ec);
      found.push_back(std::move(f));
    } catch (const std::exception&) {
      continue;
    }
  }
  // A save cut short (crash, full disk) leaves a state without its token
  // file: nothing can load it, so it only takes room.
  for (const std::string& path : orphans) RemoveIfThere(path);
  // Recency across restarts: the order the token files were last written
  // (or touched by a use, Touch).
  std::sort(found.begin(), found.end(), [](const Found& a, const Found& b) {
    // Ties (a clock of whole seconds) in a fixed order.
    return a.written != b.written ? a.written < b.written : a.point.key < b.point.key;
  });
  for (Found& f : found) {
    f.point.last_used = ++store->clock_;
    store->counts_.bytes += f.point.bytes;
    store->points_.push_back(std::move(f.point));
  }
  std::lock_guard<std::mutex> lock(store->mu_);
  store->EvictLocked({}, {});  // a smaller limit than the last run's
  return store;
}

void PointStore::Touch(const std::string& key) const {
  // Recency across restarts is the token files' modification time (Open).
  std::error_code ec;
  std::filesystem::last_write_time(PathOf(key, kTokensExt), std::filesystem::file_time_type::clock::now(), ec);
}

PointStore::Point* PointStore::LongestLocked(std::span<const int> ids, size_t limit) {
  Point* best = nullptr;
  for (Point& p : points_) {
    if (Starts(p.tokens, ids, limit) && (best == nullptr || p.tokens.size() > best->tokens.size())) {
      best = &p;
    }
  }
  return best;
}

size_t PointStore::Longest(std::span<const int> ids, size_t limit) const {
  std::lock_guard<std::mutex> lock(mu_);
  Point* best = const_cast<PointStore*>(this)->LongestLocked(ids, limit);
  return best == nullptr ? 0 : best->tokens.size();
}

void PointStore::Drop(size_t index) {
  Point& p = points_[index];
  RemoveIfThere(PathOf(p.key, kTokensExt));  // the pair is gone once this is
  RemoveIfThere(PathOf(p.key, kStateExt));
  counts_.bytes -= std::min(counts_.bytes, p.bytes);
  points_.erase(points_.begin() + static_cast<std::ptrdiff_t>(index));
}

void PointStore::EvictLocked(std::span<const int> keep, const std::string& spare) {
  while (counts_.bytes > options_.max_bytes) {
    size_t victim = points_.size();
    for (size_t i = 0; i < points_.size(); ++i) {
      const Point& p = points_[i];
      if (p.key == spare || Starts(p.tokens, keep, keep.size())) continue;
      if (victim == points_.size() || p.last_used < points_[victim].last_used) victim = i;
    }
    if (victim == points_.size()) return;  // only what must stay is left
    Drop(victim);
    ++counts_.evicted;
  }
}

Status PointStore::LoadLongest(std::span<const int> ids, size_t limit, Session& session,
                               std::vector<int>* tokens) {
  Point found;
  {
    std::lock_guard<std::mutex> lock(mu_);
    Point* p = LongestLocked(ids, limit);
    if (p == nullptr) return ArgError("prompt cache: no stored point starts this prompt");
    found = *p;
  }
  // Read without holding the store: other slots' requests look it up (and
  // may store) meanwhile. A point evicted under us fails to open or to
  // hash, which costs this request its prefill, nothing else.
  const std::string state = PathOf(found.key, kStateExt);
  Status st = FileHash(state) == found.state_hash
                  ? session.LoadState(state)
                  : FormatError("prompt cache: " + state + ": not the state its token file was saved with");
  if (st.ok() && session.position() != static_cast<int>(found.tokens.size())) {
    st = FormatError("prompt cache: " + state + ": holds " + std::to_string(session.position()) +
                     " positions, its tokens " + std::to_string(found.tokens.size()));
  }
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find_if(points_.begin(), points_.end(), [&](const Point& p) {
    return p.key == found.key && p.tokens == found.tokens;
  });
  if (!st.ok()) {
    // A point of ours (this model's vocabulary, our names) that does not
    // load is removed, so the directory stays within its size.
    if (it != points_.end()) Drop(static_cast<size_t>(it - points_.begin()));
    ++counts_.failed;
    return st;
  }
  if (it != points_.end()) {
    it->last_used = ++clock_;
    Touch(it->key);
  }
  ++counts_.loaded;
  *tokens = std::move(found.tokens);
  return Status::Ok();
}

Status PointStore::Put(Session& session, const std::vector<int>& tokens, std::span<const int> keep) {
  if (tokens.empty() || session.position() != static_cast<int>(tokens.size())) {
    return ArgError("prompt cache: the session does not stand at the point to store");
  }
  const std::string key = TokensKey(tokens);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 0; i < points_.size(); ++i) {
      if (points_[i].key != key) continue;
      if (points_[i].tokens == tokens) {
        points_[i].last_used = ++clock_;
        Touch(key);
        return Status::Ok();
      }
      Drop(i);  // another prompt with the same hash: the newer one wins
      break;
    }
    // Another slot storing the same tokens right now: one copy is enough.
    if (!writing_.insert(key).second) return Status::Ok();
  }
  const std::string token_path = PathOf(key, kTokensExt), state = PathOf(key, kStateExt);
  // The token file goes first and comes back last, so a crash in between
  // leaves a state without tokens (removed by the next Open), never tokens
  // naming another state. SaveState replaces the state atomically.
  RemoveIfThere(token_path);
  Status st = session.SaveState(state);
  std::string hash;
  if (st.ok()) {
    hash = FileHash(state);
    if (hash.empty()) st = IoError("prompt cache: cannot read back " + state);
  }
  if (st.ok()) st = WriteTokenFile(token_path, tokens, hash);
  std::lock_guard<std::mutex> lock(mu_);
  writing_.erase(key);
  Point p;
  p.bytes = st.ok() ? SizeOr0(state) + SizeOr0(token_path) : 0;
  // What must stay (the points that start `keep`) plus this one must fit;
  // if not, this one goes and nothing is evicted for it.
  uint64_t staying = p.bytes;
  for (const Point& q : points_) staying += Starts(q.tokens, keep, keep.size()) ? q.bytes : 0;
  if (st.ok() && staying > options_.max_bytes) {
    st = IoError("prompt cache: the point (" + std::to_string(tokens.size()) + " tokens, " +
                 std::to_string((p.bytes + 1023) >> 10) + " KiB) does not fit in --prompt-cache-size");
  }
  if (!st.ok()) {
    RemoveIfThere(token_path);
    RemoveIfThere(state);
    return st;
  }
  p.key = key;
  p.tokens = tokens;
  p.state_hash = hash;
  p.last_used = ++clock_;
  counts_.bytes += p.bytes;
  points_.push_back(std::move(p));
  ++counts_.stored;
  EvictLocked(keep, key);
  return Status::Ok();
}

PointStore::Counts PointStore::counts() const {
  std::lock_guard<std::mutex> lock(mu_);
  Counts c = counts_;
  c.points = points_.size();
  return c;
}

}  // namespace waste::server
