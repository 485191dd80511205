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
  static Result<std::unique_ptr<ThreadPool>> Create(int threads, std::vector<int> cpus = {});
  ~ThreadPool();

  int size() const;

  // Calls fn(begin, end) over chunks covering [0, n). Runs serially when
  // n <= min_chunk or the pool has one thread. Blocks until all chunks ran.
  // Not reentrant: fn must not call ParallelFor on the same pool.
  void ParallelFor(size_t n, size_t min_chunk,
                   const std::function<void(size_t begin, size_t end)>& fn);

  struct Impl;

 private:
  explicit ThreadPool(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Thread count from WASTE_THREADS / CPU count when `requested` is 0.
int ResolveThreadCount(int requested, const std::vector<int>& cpus);

}  // namespace waste
