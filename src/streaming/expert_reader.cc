#include "streaming/expert_reader.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "base/thread_annotations.h"

#if defined(WASTE_HAVE_IO_URING)
#include <liburing.h>
#endif

namespace waste {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

struct Pending {
  ReadRequest r;
  Clock::time_point submitted;
};

// The priority queue and the accounting both backends share. The owner
// guards each with its mutex (QueuedReader's members say so).
class RequestQueue {
 public:
  void Push(const ReadRequest& r) { q_[static_cast<size_t>(r.cls)].push_back({r, Clock::now()}); }
  void PushFront(const Pending& p) { q_[static_cast<size_t>(p.r.cls)].push_front(p); }
  bool empty() const { return q_[0].empty() && q_[1].empty() && q_[2].empty(); }
  void Promote(uint64_t tag) {
    for (size_t c = 1; c < q_.size(); ++c) {
      for (auto it = q_[c].begin(); it != q_[c].end(); ++it) {
        if (it->r.tag != tag) continue;
        Pending p = *it;
        q_[c].erase(it);
        p.r.cls = ReadClass::kDemand;
        q_[0].push_back(p);
        return;
      }
    }
  }
  bool has_demand() const { return !q_[0].empty(); }
  // Demand and warm-up in order; speculative newest first (an older guess
  // is for a layer that has probably gone by). `allow_low` = false takes
  // demand reads only.
  Pending Pop(bool allow_low = true) {
    for (size_t c = 0; c < (allow_low ? q_.size() : 1); ++c) {
      auto& q = q_[c];
      if (q.empty()) continue;
      Pending p;
      if (c == static_cast<size_t>(ReadClass::kSpeculative)) {
        p = q.back();
        q.pop_back();
      } else {
        p = q.front();
        q.pop_front();
      }
      return p;
    }
    return {};
  }

 private:
  std::array<std::deque<Pending>, 3> q_;
};

class BusyClock {
 public:
  void Start() {
    if (inflight_++ == 0) since_ = Clock::now();
  }
  void Stop(Clock::time_point now) {
    if (--inflight_ == 0) busy_ += Seconds(since_, now);
  }
  int inflight() const { return inflight_; }
  double busy() const {
    return busy_ + (inflight_ > 0 ? Seconds(since_, Clock::now()) : 0.0);
  }

 private:
  int inflight_ = 0;
  Clock::time_point since_;
  double busy_ = 0;
};

// What both readers share: the priority queue, the counters and the
// outstanding count Drain() waits on, all under mu_, and the completion
// callback (set once, called without mu_).
class QueuedReader : public ExpertReader {
 public:
  explicit QueuedReader(Completion done) : done_(std::move(done)) {}
  void Drain() override WASTE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    while (outstanding_ != 0) idle_cv_.wait(lock.native());
  }
  ReaderCounters counters() const override WASTE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    ReaderCounters c = c_;
    c.busy_seconds = busy_.busy();
    return c;
  }

 protected:
  // A request enters the queue.
  void Enqueue(const ReadRequest& r) WASTE_REQUIRES(mu_) {
    q_.Push(r);
    ++outstanding_;
  }
  // A read finished at `now` (busy time, counters, low-priority slot).
  void Landed(const Pending& p, Clock::time_point now, const Status& st) WASTE_REQUIRES(mu_) {
    busy_.Stop(now);
    ++c_.reads;
    if (st.ok()) c_.bytes += p.r.bytes;
    c_.latency_seconds += Seconds(p.submitted, now);
    if (p.r.cls != ReadClass::kDemand) --low_inflight_;
  }
  // The caller learns of the read (never with mu_ held: the callback takes
  // the cache's lock, and a submitter may hold that while it takes mu_),
  // then Drain may return.
  void Deliver(uint64_t tag, const Status& st) WASTE_EXCLUDES(mu_) {
    done_(tag, st);
    MutexLock lock(mu_);
    if (--outstanding_ == 0) idle_cv_.notify_all();
  }

  const Completion done_;
  mutable Mutex mu_;
  std::condition_variable idle_cv_;
  RequestQueue q_ WASTE_GUARDED_BY(mu_);
  BusyClock busy_ WASTE_GUARDED_BY(mu_);
  ReaderCounters c_ WASTE_GUARDED_BY(mu_);
  uint64_t outstanding_ WASTE_GUARDED_BY(mu_) = 0;  // submitted and not yet called back
  int low_inflight_ WASTE_GUARDED_BY(mu_) = 0;
};

// --- threads: N readers, one pread each at a time -----------------------------

class ThreadReader final : public QueuedReader {
 public:
  ThreadReader(int threads, Completion done) : QueuedReader(std::move(done)) {
    for (int i = 0; i < threads; ++i) {
      try {
        threads_.emplace_back([this] { Loop(); });
      } catch (...) {
        break;  // fewer readers than asked: still correct
      }
    }
  }
  ~ThreadReader() override {
    {
      MutexLock lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
  }
  bool started() const { return !threads_.empty(); }

  void Submit(const ReadRequest& r) override WASTE_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      Enqueue(r);
    }
    cv_.notify_one();
  }
  void Promote(uint64_t tag) override WASTE_EXCLUDES(mu_) {
    {
      MutexLock lock(mu_);
      q_.Promote(tag);
    }
    cv_.notify_one();
  }
  IoBackend backend() const override { return IoBackend::kThreads; }
  int threads() const override { return static_cast<int>(threads_.size()); }
  int depth() const override { return static_cast<int>(threads_.size()); }

 private:
  void Loop() WASTE_EXCLUDES(mu_) {
    for (;;) {
      Pending p;
      {
        MutexLock lock(mu_);
        while (!(stop_ || q_.has_demand() || (!q_.empty() && LowAllowed()))) {
          cv_.wait(lock.native());
        }
        if (q_.empty()) return;  // stopping and nothing left
        p = q_.Pop(LowAllowed());
        if (p.r.cls != ReadClass::kDemand) ++low_inflight_;
        busy_.Start();
      }
      Status st = p.r.file->ReadAt(p.r.offset, p.r.dst, p.r.bytes);
      Clock::time_point now = Clock::now();
      {
        MutexLock lock(mu_);
        Landed(p, now, st);
      }
      if (p.r.cls != ReadClass::kDemand) cv_.notify_one();
      Deliver(p.r.tag, st);
    }
  }

  // Speculative and warm-up reads never take the last free reader: a
  // demand read arriving next starts at once instead of queueing behind a
  // guess (with one reader there is no such reserve).
  bool LowAllowed() const WASTE_REQUIRES(mu_) {
    return stop_ || low_inflight_ < std::max(1, static_cast<int>(threads_.size()) - 1);
  }

  std::condition_variable cv_;
  bool stop_ WASTE_GUARDED_BY(mu_) = false;
  // Filled by the constructor before any reader runs, then only read.
  std::vector<std::thread> threads_;
};

#if defined(WASTE_HAVE_IO_URING)

// --- uring: one ring at depth D, one reaper thread ----------------------------

constexpr uint64_t kStopTag = ~uint64_t{0};
constexpr uint64_t kMaxFixedChunk = uint64_t{1} << 30;  // kernel limit per registered buffer

class UringReader final : public QueuedReader {
 public:
  UringReader(int depth, Completion done) : QueuedReader(std::move(done)), depth_(depth) {}
  ~UringReader() override {
    if (!ready_) return;
    Drain();
    {
      MutexLock lock(mu_);
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe != nullptr) {
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data64(sqe, kStopTag);
        io_uring_submit(&ring_);
      }
    }
    if (reaper_.joinable()) reaper_.join();
    io_uring_queue_exit(&ring_);
  }

  Status Start(std::span<uint8_t> arena, uint64_t stride, bool register_buffers)
      WASTE_EXCLUDES(mu_) {
    unsigned entries = 8;
    while (entries < static_cast<unsigned>(2 * depth_ + 2)) entries *= 2;
    int rc = io_uring_queue_init(entries, &ring_, 0);
    if (rc < 0) return IoError(fmt::format("io_uring_queue_init: {}", std::strerror(-rc)));
    ready_ = true;
    {
      MutexLock lock(mu_);  // no reaper yet: for the analysis' sake
      requests_.resize(static_cast<size_t>(depth_));
      for (int i = depth_ - 1; i >= 0; --i) free_.push_back(i);
    }
    if (register_buffers && !arena.empty() && stride > 0) RegisterArena(arena, stride);
    try {
      reaper_ = std::thread([this] { Reap(); });
    } catch (...) {
      return IoError("cannot start the io_uring reaper thread");
    }
    return Status::Ok();
  }

  void Submit(const ReadRequest& r) override WASTE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    Enqueue(r);
    Pump();
  }
  void Promote(uint64_t tag) override WASTE_EXCLUDES(mu_) {
    MutexLock lock(mu_);
    q_.Promote(tag);
    Pump();
  }
  IoBackend backend() const override { return IoBackend::kUring; }
  int threads() const override { return 1; }
  int depth() const override { return depth_; }
  bool fixed_buffers() const override { return !chunks_.empty(); }

 private:
  // Registers the arena in chunks of whole slots (each at most 1 GiB) so
  // reads need no page pinning per request. Failure (RLIMIT_MEMLOCK for
  // unprivileged users, old kernels) just leaves plain reads.
  void RegisterArena(std::span<uint8_t> arena, uint64_t stride) {
    uint64_t per = std::max<uint64_t>(1, kMaxFixedChunk / stride) * stride;
    std::vector<iovec> iov;
    for (uint64_t off = 0; off < arena.size(); off += per) {
      iovec v;
      v.iov_base = arena.data() + off;
      v.iov_len = static_cast<size_t>(std::min<uint64_t>(per, arena.size() - off));
      iov.push_back(v);
    }
    if (iov.size() > 16384) return;
    if (io_uring_register_buffers(&ring_, iov.data(), static_cast<unsigned>(iov.size())) == 0) {
      chunks_ = std::move(iov);
      chunk_bytes_ = per;
      arena_base_ = arena.data();
    }
  }

  // Moves queued requests into the ring while fewer than depth_ are in
  // flight. Called with mu_ held (by submitters and by the reaper).
  // Speculative and warm-up reads fill at most half the depth, so a demand
  // read always finds room in the ring and the device is never so deep in
  // guesses that a needed record waits behind them.
  void Pump() WASTE_REQUIRES(mu_) {
    int added = 0;
    const int low_cap = std::max(1, depth_ / 2);
    while (!free_.empty() && !q_.empty()) {
      const bool allow_low = low_inflight_ < low_cap;
      if (!allow_low && !q_.has_demand()) break;
      io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
      if (sqe == nullptr) break;
      int idx = free_.back();
      free_.pop_back();
      Pending& p = requests_[static_cast<size_t>(idx)];
      p = q_.Pop(allow_low);
      if (p.r.cls != ReadClass::kDemand) ++low_inflight_;
      Prep(sqe, p.r.file, p.r.offset, p.r.dst, p.r.bytes);
      io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(idx));
      busy_.Start();
      ++added;
    }
    if (added > 0) io_uring_submit(&ring_);
  }

  void Prep(io_uring_sqe* sqe, const platform::File* f, uint64_t offset, uint8_t* dst,
            size_t bytes) WASTE_REQUIRES(mu_) {
    int fd = static_cast<int>(f->native_handle());
    if (!chunks_.empty() && dst >= arena_base_) {
      uint64_t rel = static_cast<uint64_t>(dst - arena_base_);
      uint64_t chunk = rel / chunk_bytes_;
      if (chunk < chunks_.size() && rel + bytes <= chunk * chunk_bytes_ + chunks_[chunk].iov_len) {
        io_uring_prep_read_fixed(sqe, fd, dst, static_cast<unsigned>(bytes), offset,
                                 static_cast<int>(chunk));
        return;
      }
    }
    io_uring_prep_read(sqe, fd, dst, static_cast<unsigned>(bytes), offset);
  }

  void Reap() WASTE_EXCLUDES(mu_) {
    for (;;) {
      io_uring_cqe* cqe = nullptr;
      int rc = io_uring_wait_cqe(&ring_, &cqe);
      if (rc == -EINTR || rc == -EAGAIN) continue;
      if (rc < 0) {
        // The ring itself failed: finish everything in flight with the error
        // so no waiter hangs, then keep serving through plain reads.
        FailAll(rc);
        continue;
      }
      uint64_t tag = io_uring_cqe_get_data64(cqe);
      int res = cqe->res;
      io_uring_cqe_seen(&ring_, cqe);
      if (tag == kStopTag) return;
      Finish(static_cast<int>(tag), res);
    }
  }

  void Finish(int idx, int res) WASTE_EXCLUDES(mu_) {
    Pending p;
    {
      MutexLock lock(mu_);
      p = requests_[static_cast<size_t>(idx)];
      if (res == -EAGAIN || res == -EINTR) {
        // Resubmit as it was: the kernel asked us to try again.
        io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
        if (sqe != nullptr) {
          Prep(sqe, p.r.file, p.r.offset, p.r.dst, p.r.bytes);
          io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(idx));
          io_uring_submit(&ring_);
          return;
        }
      }
    }
    Status st = Status::Ok();
    if (res < 0) {
      if (res == -EAGAIN || res == -EINTR) {
        st = p.r.file->ReadAt(p.r.offset, p.r.dst, p.r.bytes);
      } else {
        st = IoError(fmt::format("read {} at offset {}: {}", p.r.file->path(), p.r.offset,
                                 std::strerror(-res)));
      }
    } else if (static_cast<size_t>(res) < p.r.bytes) {
      // A short completion: finish the rest with a plain positioned read
      // (it reports a real end of file as a short read).
      size_t got = static_cast<size_t>(res);
      if (got % platform::kBypassAlignment == 0 || !p.r.file->bypass()) {
        st = got == 0 ? IoError(fmt::format("short read: {} at offset {}: got 0 of {} bytes",
                                            p.r.file->path(), p.r.offset, p.r.bytes))
                      : p.r.file->ReadAt(p.r.offset + got, p.r.dst + got, p.r.bytes - got);
      } else {
        st = IoError(fmt::format("short read: {} at offset {}: got {} of {} bytes",
                                 p.r.file->path(), p.r.offset, got, p.r.bytes));
      }
    }
    Clock::time_point now = Clock::now();
    {
      MutexLock lock(mu_);
      Landed(p, now, st);
      free_.push_back(idx);
      Pump();
    }
    Deliver(p.r.tag, st);
  }

  void FailAll(int rc) WASTE_EXCLUDES(mu_) {
    std::vector<int> live;
    {
      MutexLock lock(mu_);
      std::vector<bool> is_free(requests_.size(), false);
      for (int i : free_) is_free[static_cast<size_t>(i)] = true;
      for (size_t i = 0; i < requests_.size(); ++i) {
        if (!is_free[i]) live.push_back(static_cast<int>(i));
      }
    }
    for (int idx : live) Finish(idx, rc);
  }

  const int depth_;
  // The submission side (get_sqe, submit) is used under mu_; the completion
  // side (wait_cqe, cqe_seen) by the reaper alone. liburing allows the two
  // on different threads, so the ring as a whole is not guarded by mu_.
  io_uring ring_{};
  bool ready_ = false;              // set by Start before the reaper exists
  std::thread reaper_;
  std::vector<Pending> requests_ WASTE_GUARDED_BY(mu_);  // by ring user_data
  std::vector<int> free_ WASTE_GUARDED_BY(mu_);          // request slots not in the ring
  // Registered buffers: written by Start before the reaper exists, then only read.
  std::vector<iovec> chunks_;
  uint64_t chunk_bytes_ = 0;
  uint8_t* arena_base_ = nullptr;
};

#endif  // WASTE_HAVE_IO_URING

}  // namespace

const char* IoBackendName(IoBackend b) {
  switch (b) {
    case IoBackend::kSync: return "sync";
    case IoBackend::kThreads: return "threads";
    case IoBackend::kUring: return "io_uring";
  }
  return "?";
}

bool UringAvailable() {
#if defined(WASTE_HAVE_IO_URING)
  static const bool ok = [] {
    io_uring ring;
    if (io_uring_queue_init(2, &ring, 0) != 0) return false;
    io_uring_queue_exit(&ring);
    return true;
  }();
  return ok;
#else
  return false;
#endif
}

IoChoice ResolveIoChoice(int io_threads, int depth, const std::string& want,
                         bool register_buffers) {
  IoChoice c;
  c.threads = std::clamp(io_threads, 0, 8);
  c.depth = std::clamp(depth, 1, 64);
  // Registered buffers pin (and so fault in) the whole arena at open:
  // opt-in (WASTE_IO_FIXED=1), see docs/PERFORMANCE.md.
  c.register_buffers = register_buffers;
  if (c.threads == 0 || want == "sync") {
    c.backend = IoBackend::kSync;
    return c;
  }
  if (want == "threads") {
    c.backend = IoBackend::kThreads;
  } else {
    c.backend = UringAvailable() ? IoBackend::kUring : IoBackend::kThreads;
  }
  return c;
}

Result<std::unique_ptr<ExpertReader>> ExpertReader::Create(const IoChoice& choice,
                                                           std::span<uint8_t> arena,
                                                           uint64_t arena_stride,
                                                           Completion done) {
  if (choice.backend == IoBackend::kSync) return std::unique_ptr<ExpertReader>();
#if defined(WASTE_HAVE_IO_URING)
  if (choice.backend == IoBackend::kUring) {
    auto r = std::make_unique<UringReader>(choice.depth, done);
    if (r->Start(arena, arena_stride, choice.register_buffers).ok()) {
      return std::unique_ptr<ExpertReader>(std::move(r));
    }
    // fall through to the thread readers
  }
#else
  (void)arena;
  (void)arena_stride;
#endif
  auto t = std::make_unique<ThreadReader>(std::max(1, choice.threads), std::move(done));
  if (!t->started()) return std::unique_ptr<ExpertReader>();  // synchronous after all
  return std::unique_ptr<ExpertReader>(std::move(t));
}

}  // namespace waste
