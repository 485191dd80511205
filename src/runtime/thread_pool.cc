// Fork-join pool (ENGINE.md §6). The split into chunks is fixed by
// (n, min_chunk, threads); which thread runs a chunk is not, and does not
// matter because every output element is computed inside one chunk.
//
// A job is published as a new generation of one atomic word that also
// holds the chunk count and the next unclaimed chunk. Idle workers poll it
// for `spin_us` microseconds, then park on a condition variable. The caller
// wakes only as many parked workers as there are chunks it cannot take
// itself, so a two-chunk job costs one wake-up, not `threads - 1`.
#include "runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <system_error>
#include <thread>

#include "platform/platform.h"

namespace waste {
namespace {

// Poll interval hint: tells the core we are spinning (frees the sibling
// hyper-thread, saves power). An ISA detail, not an OS one.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Default spin before parking, from the measurement in docs/PLATFORM.md:
// parking at once costs a futex wake-up (~10 µs) per fork-join and a decode
// step issues hundreds of them; any spin of 20-1000 µs removes that, and a
// short one wastes least when the job stream pauses (I/O, sampling).
constexpr int kDefaultSpinUs = 50;

// Cap for the spin: beyond a few milliseconds spinning is just burning.
constexpr int kMaxSpinUs = 100000;

std::atomic<uint64_t> g_next_pool_id{1};
// Which pool (by id) the calling thread last bound itself for.
thread_local uint64_t t_bound_pool_id = 0;
// ThreadPool::CurrentWorker(): 0 for callers, 1..n-1 for pool workers.
thread_local int t_worker_index = 0;

using Clock = std::chrono::steady_clock;

}  // namespace

// The job word: generation (40 bits) | chunk count (12) | next chunk (12).
// Claiming a chunk is one CAS on it, so a worker that arrives late (after
// the job finished and the next one started) sees another generation and
// claims nothing: nobody ever waits for stragglers.
constexpr int kIdxBits = 12;
constexpr uint64_t kIdxMask = (uint64_t{1} << kIdxBits) - 1;
constexpr int kMaxThreads = static_cast<int>(kIdxMask);

inline uint64_t Gen(uint64_t w) { return w >> (2 * kIdxBits); }
inline uint64_t Count(uint64_t w) { return (w >> kIdxBits) & kIdxMask; }
inline uint64_t Next(uint64_t w) { return w & kIdxMask; }

struct ThreadPool::Impl {
  int threads = 1;
  std::vector<int> cpus;
  uint64_t id = 0;
  int spin_us = kDefaultSpinUs;
  std::vector<std::thread> workers;

  std::mutex dispatch_mu;  // one job at a time, whoever calls

  // The current job. Written by the caller before it publishes a new
  // generation in `work`; read only by a thread that has just claimed one
  // of its chunks, and the job cannot end before that chunk is done.
  const std::function<void(size_t, size_t)>* fn = nullptr;
  size_t n = 0;
  size_t chunk = 0;
  std::atomic<uint64_t> work{0};
  std::atomic<size_t> done{0};

  std::atomic<int> parked{0};
  std::atomic<bool> stop{false};
  std::mutex park_mu;
  std::condition_variable park_cv;

  std::atomic<bool> caller_waiting{false};
  std::mutex done_mu;
  std::condition_variable done_cv;

  // Claims and runs chunks of generation `gen` until none is left.
  void RunChunks(uint64_t gen) {
    uint64_t w = work.load(std::memory_order_acquire);
    for (;;) {
      if (Gen(w) != gen || Next(w) >= Count(w)) return;
      if (!work.compare_exchange_weak(w, w + 1, std::memory_order_acq_rel,
                                      std::memory_order_acquire)) {
        continue;  // `w` was reloaded
      }
      size_t i = static_cast<size_t>(Next(w));
      size_t count = static_cast<size_t>(Count(w));
      size_t begin = i * chunk;
      size_t end = std::min(n, begin + chunk);
      (*fn)(begin, end);
      if (done.fetch_add(1, std::memory_order_acq_rel) + 1 == count &&
          caller_waiting.load(std::memory_order_seq_cst)) {
        std::lock_guard<std::mutex> lock(done_mu);
        done_cv.notify_one();
      }
      w = work.load(std::memory_order_acquire);
    }
  }

  // Waits for a generation other than `seen`; false when the pool stops.
  bool WaitForJob(uint64_t seen, uint64_t* gen) {
    if (spin_us > 0) {
      Clock::time_point deadline = Clock::now() + std::chrono::microseconds(spin_us);
      for (unsigned iter = 0;; ++iter) {
        uint64_t g = Gen(work.load(std::memory_order_acquire));
        if (stop.load(std::memory_order_relaxed)) return false;
        if (g != seen) {
          *gen = g;
          return true;
        }
        CpuRelax();
        if ((iter & 63) == 63) {
          if (Clock::now() >= deadline) break;
          // On an oversubscribed machine the thread we wait for may need
          // this core; a yield costs little when nobody does.
          std::this_thread::yield();
        }
      }
    }
    std::unique_lock<std::mutex> lock(park_mu);
    parked.fetch_add(1, std::memory_order_seq_cst);
    for (;;) {
      uint64_t g = Gen(work.load(std::memory_order_seq_cst));
      if (stop.load(std::memory_order_relaxed)) {
        parked.fetch_sub(1, std::memory_order_relaxed);
        return false;
      }
      if (g != seen) {
        parked.fetch_sub(1, std::memory_order_relaxed);
        *gen = g;
        return true;
      }
      park_cv.wait(lock);
    }
  }

  void WorkerMain(int index) {
    t_worker_index = index;
    if (!cpus.empty()) {
      // A refused bind leaves the thread where the OS put it; Create has
      // already checked the list against the process's CPUs.
      (void)platform::BindCurrentThread(cpus);
    }
    uint64_t seen = 0;
    for (;;) {
      uint64_t gen = 0;
      if (!WaitForJob(seen, &gen)) return;
      seen = gen;
      RunChunks(gen);
    }
  }

  void WaitDone(size_t count) {
    if (done.load(std::memory_order_acquire) == count) return;
    Clock::time_point deadline = Clock::now() + std::chrono::microseconds(spin_us);
    for (unsigned iter = 0;; ++iter) {
      if (done.load(std::memory_order_acquire) == count) return;
      CpuRelax();
      if ((iter & 63) == 63) {
        if (Clock::now() >= deadline) break;
        std::this_thread::yield();  // the worker we wait for may need this core
      }
    }
    caller_waiting.store(true, std::memory_order_seq_cst);
    {
      std::unique_lock<std::mutex> lock(done_mu);
      while (done.load(std::memory_order_seq_cst) != count) done_cv.wait(lock);
    }
    caller_waiting.store(false, std::memory_order_relaxed);
  }

  void BindCaller() {
    if (cpus.empty() || t_bound_pool_id == id) return;
    // Bound once and for good: the thread that runs parallel regions (a
    // server's decode thread, not necessarily the opener) stays on the list.
    (void)platform::BindCurrentThread(cpus);
    t_bound_pool_id = id;
  }
};

Result<std::unique_ptr<ThreadPool>> ThreadPool::Create(int threads, std::vector<int> cpus,
                                                       int spin_us) {
  if (threads < 1) return ArgError("thread pool needs at least one thread");
  threads = std::min(threads, kMaxThreads);
  if (!cpus.empty()) {
    if (!platform::kHaveAffinity) {
      return UnsupportedError("binding threads to CPUs needs Linux or Windows");
    }
    std::vector<int> allowed = platform::AllowedCpus();
    for (int cpu : cpus) {
      if (!allowed.empty() && !std::binary_search(allowed.begin(), allowed.end(), cpu)) {
        return ArgError("CPU " + std::to_string(cpu) + " is not available to this process");
      }
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->threads = threads;
  impl->cpus = std::move(cpus);
  impl->id = g_next_pool_id.fetch_add(1, std::memory_order_relaxed);
  impl->spin_us = spin_us < 0 ? kDefaultSpinUs : std::min(spin_us, kMaxSpinUs);
  Impl* raw = impl.get();
  for (int i = 1; i < threads; ++i) {
    try {
      impl->workers.emplace_back([raw, i] { raw->WorkerMain(i); });
    } catch (const std::system_error&) {
      break;  // the pool is simply smaller (ENGINE.md §6.1)
    }
  }
  impl->threads = static_cast<int>(impl->workers.size()) + 1;
  return std::unique_ptr<ThreadPool>(new ThreadPool(std::move(impl)));
}

ThreadPool::ThreadPool(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(impl_->park_mu);
    impl_->stop.store(true, std::memory_order_seq_cst);
  }
  impl_->park_cv.notify_all();
  for (std::thread& t : impl_->workers) t.join();
}

int ThreadPool::size() const { return impl_->threads; }

int ThreadPool::spin_us() const { return impl_->spin_us; }

size_t ThreadPool::ChunkSize(size_t n, size_t min_chunk, int threads) {
  if (min_chunk == 0) min_chunk = 1;
  size_t t = threads < 1 ? 1 : static_cast<size_t>(threads);
  size_t chunk = (n + t - 1) / t;
  chunk = (chunk + min_chunk - 1) / min_chunk * min_chunk;
  return chunk == 0 ? 1 : chunk;
}

int ThreadPool::CurrentWorker() { return t_worker_index; }

void ThreadPool::ParallelFor(size_t n, size_t min_chunk,
                             const std::function<void(size_t begin, size_t end)>& fn) {
  if (n == 0) return;
  Impl& p = *impl_;
  p.BindCaller();
  if (min_chunk == 0) min_chunk = 1;
  size_t chunk = ChunkSize(n, min_chunk, p.threads);
  size_t nchunks = (n + chunk - 1) / chunk;
  if (p.threads == 1 || n <= min_chunk || nchunks == 1) {
    fn(0, n);
    return;
  }
  Run(n, chunk, nchunks, fn);
}

void ThreadPool::ParallelForDynamic(size_t n, size_t chunk,
                                    const std::function<void(size_t begin, size_t end)>& fn) {
  if (n == 0) return;
  Impl& p = *impl_;
  p.BindCaller();
  if (chunk == 0) chunk = 1;
  size_t nchunks = (n + chunk - 1) / chunk;
  if (nchunks > kIdxMask) {  // the job word counts chunks in 12 bits
    chunk = (n + kIdxMask - 1) / kIdxMask;
    nchunks = (n + chunk - 1) / chunk;
  }
  if (p.threads == 1 || nchunks == 1) {
    for (size_t b = 0; b < n; b += chunk) fn(b, std::min(n, b + chunk));
    return;
  }
  Run(n, chunk, nchunks, fn);
}

void ThreadPool::Run(size_t n, size_t chunk, size_t nchunks,
                     const std::function<void(size_t begin, size_t end)>& fn) {
  Impl& p = *impl_;
  std::lock_guard<std::mutex> dispatch(p.dispatch_mu);
  p.fn = &fn;
  p.n = n;
  p.chunk = chunk;
  p.done.store(0, std::memory_order_relaxed);
  uint64_t gen = Gen(p.work.load(std::memory_order_relaxed)) + 1;
  p.work.store((gen << (2 * kIdxBits)) | (uint64_t{nchunks} << kIdxBits),
               std::memory_order_seq_cst);

  // Spinning workers see the new generation by themselves; wake parked
  // ones only for the chunks nobody else will take.
  int helpers_wanted = static_cast<int>(std::min<size_t>(nchunks - 1, p.workers.size()));
  int parked = p.parked.load(std::memory_order_seq_cst);
  int spinning = static_cast<int>(p.workers.size()) - parked;
  int to_wake = std::min(parked, helpers_wanted - spinning);
  if (to_wake > 0) {
    { std::lock_guard<std::mutex> lock(p.park_mu); }
    if (to_wake >= parked) {
      p.park_cv.notify_all();
    } else {
      for (int i = 0; i < to_wake; ++i) p.park_cv.notify_one();
    }
  }

  p.RunChunks(gen);
  p.WaitDone(nchunks);
}

int ResolveThreadCount(int requested, const std::vector<int>& cpus) {
  int n = requested;
  if (n <= 0 && !cpus.empty()) n = static_cast<int>(cpus.size());
  if (n <= 0) n = platform::CpuCount();
  return std::clamp(n, 1, 64);
}

}  // namespace waste
