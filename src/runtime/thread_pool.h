// Fork-join thread pool. ParallelFor splits [0, n) into contiguous chunks by
// a rule that depends only on n, min_chunk and the pool size, and every
// kernel computes each output element within one chunk, so results are
// bit-identical at any thread count. The calling thread is a worker.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

#include "waste/status.h"

namespace waste {

class ThreadPool {
 public:
  // threads >= 1 (the caller counts as one). `cpus` non-empty binds every
  // pool thread (and lazily the caller) to that set.
  // `spin_us` < 0: the default spin before an idle worker parks (50 µs).
  static Result<std::unique_ptr<ThreadPool>> Create(int threads, std::vector<int> cpus = {},
                                                    int spin_us = -1);
  ~ThreadPool();

  int size() const;

  // Calls fn(begin, end) over chunks covering [0, n). Runs serially when
  // n <= min_chunk or the pool has one thread. Blocks until all chunks ran.
  // Not reentrant: fn must not call ParallelFor on the same pool.
  void ParallelFor(size_t n, size_t min_chunk,
                   const std::function<void(size_t begin, size_t end)>& fn);

  // Calls fn(begin, end) over chunks of exactly `chunk` items (the last may
  // be shorter), claimed one at a time by whichever thread is free: for
  // uneven work items (experts with different token counts) and for
  // machines where a thread may be descheduled. The split depends only on
  // (n, chunk), so per-item results never depend on the thread count.
  void ParallelForDynamic(size_t n, size_t chunk,
                          const std::function<void(size_t begin, size_t end)>& fn);

  // 0 on any thread that is not one of this process's pool workers (the
  // caller of ParallelFor), else the worker's number 1..size()-1: an index
  // for per-thread scratch inside a parallel region.
  static int CurrentWorker();

  // The chunk length ParallelFor uses: ceil(n / threads) rounded up to a
  // multiple of min_chunk (min_chunk 0 counts as 1). Chunk i covers
  // [i * chunk, min(n, (i + 1) * chunk)). Exposed so tests and callers can
  // reason about the split.
  static size_t ChunkSize(size_t n, size_t min_chunk, int threads);

  // Microseconds an idle worker polls for the next job before parking
  // (WASTE_SPIN, read at Create; docs/PLATFORM.md has the measurement).
  int spin_us() const;

  struct Impl;

 private:
  explicit ThreadPool(std::unique_ptr<Impl> impl);
  void Run(size_t n, size_t chunk, size_t nchunks,
           const std::function<void(size_t begin, size_t end)>& fn);
  std::unique_ptr<Impl> impl_;
};

// `requested` (the caller resolved Config and WASTE_THREADS), else one per
// listed CPU, else the CPU count; clamped to 1..64.
int ResolveThreadCount(int requested, const std::vector<int>& cpus);

}  // namespace waste
