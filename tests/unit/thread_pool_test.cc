// Fork-join pool: coverage, a split fixed by its inputs, bit-identical
// results at any thread count, binding to a cpu list, thread-count rule.
// The empty-dispatch timing at the end is printed, never asserted
// (docs/PLATFORM.md records it).
#include "runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "platform/platform.h"

namespace waste {
namespace {

std::unique_ptr<ThreadPool> MakePool(int threads, std::vector<int> cpus = {}, int spin_us = -1) {
  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(threads, std::move(cpus), spin_us);
  EXPECT_TRUE(pool.has_value()) << pool.error().ToString();
  return pool.has_value() ? std::move(pool).value() : nullptr;
}


TEST(ThreadPool, CreateRefusesZeroThreads) {
  EXPECT_EQ(ThreadPool::Create(0).error().code(), Errc::kArg);
}

TEST(ThreadPool, EveryIndexExactlyOnce) {
  for (int threads : {1, 2, 3, 4, 7}) {
    std::unique_ptr<ThreadPool> pool = MakePool(threads);
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(pool->size(), threads);
    for (size_t n : {size_t{0}, size_t{1}, size_t{5}, size_t{63}, size_t{64}, size_t{65},
                     size_t{1000}, size_t{4097}}) {
      for (size_t min_chunk : {size_t{0}, size_t{1}, size_t{8}, size_t{64}}) {
        std::vector<std::atomic<int>> seen(n);
        pool->ParallelFor(n, min_chunk, [&](size_t b, size_t e) {
          for (size_t i = b; i < e; ++i) seen[i].fetch_add(1);
        });
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(seen[i].load(), 1) << "threads " << threads << " n " << n << " min_chunk "
                                       << min_chunk << " index " << i;
        }
      }
    }
  }
}

// The chunks a call produced, sorted.
std::vector<std::pair<size_t, size_t>> Chunks(ThreadPool& pool, size_t n, size_t min_chunk) {
  std::mutex mu;
  std::vector<std::pair<size_t, size_t>> chunks;
  pool.ParallelFor(n, min_chunk, [&](size_t b, size_t e) {
    std::lock_guard<std::mutex> lock(mu);
    chunks.emplace_back(b, e);
  });
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST(ThreadPool, SplitIsFixedByItsInputs) {
  std::unique_ptr<ThreadPool> pool = MakePool(4);
  ASSERT_NE(pool, nullptr);
  for (size_t n : {size_t{10}, size_t{100}, size_t{1001}}) {
    for (size_t min_chunk : {size_t{1}, size_t{16}}) {
      auto first = Chunks(*pool, n, min_chunk);
      for (int rep = 0; rep < 20; ++rep) ASSERT_EQ(Chunks(*pool, n, min_chunk), first);
      // Contiguous ranges of the documented length.
      if (n <= min_chunk) continue;
      size_t chunk = ThreadPool::ChunkSize(n, min_chunk, 4);
      EXPECT_EQ(chunk % min_chunk, 0u);
      for (size_t i = 0; i < first.size(); ++i) {
        EXPECT_EQ(first[i].first, i * chunk);
        EXPECT_EQ(first[i].second, std::min(n, (i + 1) * chunk));
      }
    }
  }
  EXPECT_EQ(ThreadPool::ChunkSize(100, 1, 4), 25u);
  EXPECT_EQ(ThreadPool::ChunkSize(100, 16, 4), 32u);
  EXPECT_EQ(ThreadPool::ChunkSize(10, 0, 3), 4u);
}

// ParallelForDynamic: every index exactly once, chunks of exactly `chunk`
// items (the last shorter) whatever the thread count, claimed by more than
// one thread when the work is uneven, and CurrentWorker() a valid
// per-thread scratch index inside the region.
TEST(ThreadPool, DynamicCoversEveryIndexInFixedChunks) {
  for (int threads : {1, 2, 3, 4}) {
    std::unique_ptr<ThreadPool> pool = MakePool(threads);
    ASSERT_NE(pool, nullptr);
    for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{64}, size_t{65}, size_t{1000}}) {
      for (size_t chunk : {size_t{0}, size_t{1}, size_t{3}, size_t{16}}) {
        std::vector<std::atomic<int>> seen(n);
        std::mutex mu;
        std::vector<std::pair<size_t, size_t>> chunks;
        std::atomic<bool> bad_worker{false};
        pool->ParallelForDynamic(n, chunk, [&](size_t b, size_t e) {
          const int w = ThreadPool::CurrentWorker();
          if (w < 0 || w >= threads) bad_worker = true;
          for (size_t i = b; i < e; ++i) seen[i].fetch_add(1);
          std::lock_guard<std::mutex> lock(mu);
          chunks.emplace_back(b, e);
        });
        EXPECT_FALSE(bad_worker.load()) << "threads " << threads;
        for (size_t i = 0; i < n; ++i) {
          ASSERT_EQ(seen[i].load(), 1) << "threads " << threads << " n " << n << " chunk " << chunk
                                       << " index " << i;
        }
        std::sort(chunks.begin(), chunks.end());
        const size_t c = std::max<size_t>(1, chunk);
        ASSERT_EQ(chunks.size(), (n + c - 1) / c) << "threads " << threads << " n " << n;
        for (size_t i = 0; i < chunks.size(); ++i) {
          EXPECT_EQ(chunks[i].first, i * c);
          EXPECT_EQ(chunks[i].second, std::min(n, (i + 1) * c));
        }
      }
    }
  }
}

TEST(ThreadPool, DynamicSharesUnevenWork) {
  // Item 0 blocks until every other item has run. Claimed dynamically, the
  // thread that did not take item 0 runs all 40 others and releases it;
  // with a split fixed in advance (static halves) the thread holding item 0
  // would also own some of the others and item 0 would wait for ever (here:
  // until the 20 s timeout, which fails the test).
  std::unique_ptr<ThreadPool> pool = MakePool(2);
  ASSERT_NE(pool, nullptr);
  constexpr size_t kShort = 40;
  std::mutex mu;
  std::condition_variable done_cv;
  size_t done = 0;
  bool timed_out = false;
  std::thread::id long_thread;
  std::vector<std::thread::id> short_threads;
  pool->ParallelForDynamic(kShort + 1, 1, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) {
      std::unique_lock<std::mutex> lock(mu);
      if (i == 0) {
        long_thread = std::this_thread::get_id();
        timed_out = !done_cv.wait_for(lock, std::chrono::seconds(20), [&] { return done == kShort; });
      } else {
        short_threads.push_back(std::this_thread::get_id());
        if (++done == kShort) done_cv.notify_all();
      }
    }
  });
  EXPECT_FALSE(timed_out);
  ASSERT_EQ(short_threads.size(), kShort);
  for (std::thread::id id : short_threads) EXPECT_NE(id, long_thread);
}

TEST(ThreadPool, SerialWhenSmall) {
  std::unique_ptr<ThreadPool> pool = MakePool(4);
  ASSERT_NE(pool, nullptr);
  auto chunks = Chunks(*pool, 64, 64);
  ASSERT_EQ(chunks.size(), 1u);
  EXPECT_EQ(chunks[0], std::make_pair(size_t{0}, size_t{64}));
}

// Row-wise dot products: each output row is computed inside one chunk, as
// every kernel does, so the result may not depend on the thread count.
std::vector<float> RowSums(ThreadPool& pool, const std::vector<float>& m, size_t rows,
                           size_t cols) {
  std::vector<float> out(rows);
  pool.ParallelFor(rows, 4, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) {
      float acc = 0;
      for (size_t c = 0; c < cols; ++c) acc += m[r * cols + c] * (1.0f / float(c + 1));
      out[r] = acc;
    }
  });
  return out;
}

TEST(ThreadPool, ResultsBitIdenticalAt1_2_4Threads) {
  const size_t rows = 1037, cols = 301;
  std::vector<float> m(rows * cols);
  uint32_t x = 12345;
  for (float& v : m) {
    x = x * 1664525u + 1013904223u;
    v = float(x >> 8) / float(1 << 24) - 0.5f;
  }
  std::vector<float> ref;
  for (int threads : {1, 2, 4}) {
    std::unique_ptr<ThreadPool> pool = MakePool(threads);
    ASSERT_NE(pool, nullptr);
    std::vector<float> got = RowSums(*pool, m, rows, cols);
    if (ref.empty()) {
      ref = got;
    } else {
      ASSERT_EQ(std::memcmp(ref.data(), got.data(), rows * sizeof(float)), 0)
          << "threads " << threads;
    }
  }
}

TEST(ThreadPool, ManyBackToBackJobs) {
  // Stresses job hand-over: late workers must never run a stale job.
  for (int spin : {0, 50}) {
    std::unique_ptr<ThreadPool> pool = MakePool(4, {}, spin);
    ASSERT_NE(pool, nullptr);
    std::vector<std::atomic<int>> seen(257);
    for (int rep = 0; rep < 5000; ++rep) {
      size_t n = 1 + static_cast<size_t>(rep * 37) % 257;
      pool->ParallelFor(n, 1, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) seen[i].fetch_add(1, std::memory_order_relaxed);
      });
      for (size_t i = 0; i < n; ++i) {
        ASSERT_EQ(seen[i].exchange(0), 1) << "spin " << spin << " rep " << rep << " index " << i;
      }
    }
  }
}

TEST(ThreadPool, SpinIsTheCallersChoiceWithADefault) {
  auto spin = [](int us) {
    Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(2, {}, us);
    EXPECT_TRUE(pool.has_value());
    return pool.has_value() ? (*pool)->spin_us() : -2;
  };
  EXPECT_EQ(spin(0), 0);
  EXPECT_EQ(spin(250), 250);
  EXPECT_EQ(spin(10000000), 100000);  // capped
  EXPECT_GT(spin(-1), 0);             // the default
  EXPECT_GT(MakePool(2)->spin_us(), 0);
}

// WASTE_THREADS is read by ResolveOptions (engine_env_test), not here.
TEST(ThreadPool, ResolveThreadCount) {
  EXPECT_EQ(ResolveThreadCount(3, {0, 1}), 3);  // explicit wins
  EXPECT_EQ(ResolveThreadCount(0, {0, 1}), 2);  // cpus listed
  EXPECT_EQ(ResolveThreadCount(0, {}), std::clamp(platform::CpuCount(), 1, 64));
  EXPECT_EQ(ResolveThreadCount(500, {}), 64);  // clamped
}

// Runs `body` on a fresh thread so binding never narrows the test's main
// thread (which later tests and CpuCount rely on).
template <typename F>
void OnFreshThread(F body) {
  std::thread t(body);
  t.join();
}

void ExpectBoundTo(const std::vector<int>& cpus) {
  std::unique_ptr<ThreadPool> pool =
      MakePool(ResolveThreadCount(0, cpus) < 2 ? 2 : ResolveThreadCount(0, cpus), cpus);
  ASSERT_NE(pool, nullptr);
  std::mutex mu;
  std::set<std::thread::id> ids;
  std::vector<std::vector<int>> masks;
  // Two long chunks: the caller takes one, a worker the other.
  pool->ParallelFor(2 * static_cast<size_t>(pool->size()), 1, [&](size_t, size_t) {
    std::vector<int> mask = platform::CurrentThreadCpus();
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
    masks.push_back(mask);
  });
  for (const auto& mask : masks) EXPECT_EQ(mask, cpus);
  EXPECT_GT(ids.size(), 1u) << "only one thread ran chunks";
  EXPECT_EQ(platform::CurrentThreadCpus(), cpus) << "the caller was not bound";
}

TEST(ThreadPool, BindsEveryThreadToTheList) {
  if (!platform::kHaveAffinity) {
    EXPECT_EQ(ThreadPool::Create(2, {0}).error().code(), Errc::kUnsupported);
    GTEST_SKIP() << "this OS cannot bind threads";
  }
  std::vector<int> allowed = platform::CurrentThreadCpus();
  if (allowed.empty()) GTEST_SKIP() << "thread affinity cannot be read here";
  EXPECT_EQ(ResolveThreadCount(0, {allowed.back()}), 1);
  OnFreshThread([&] { ExpectBoundTo({allowed.back()}); });
  if (allowed.size() >= 2) {
    OnFreshThread([&] { ExpectBoundTo({allowed[0], allowed[1]}); });
  }
}

TEST(ThreadPool, RefusesCpusOutsideTheProcess) {
  if (!platform::kHaveAffinity) GTEST_SKIP() << "this OS cannot bind threads";
  std::vector<int> allowed = platform::AllowedCpus();
  if (allowed.empty()) GTEST_SKIP() << "affinity cannot be read here";
  int outside = 1023;
  while (std::find(allowed.begin(), allowed.end(), outside) != allowed.end()) --outside;
  EXPECT_EQ(ThreadPool::Create(2, {outside}).error().code(), Errc::kArg);
}

// Busy-waits `us` microseconds (work that cannot be optimised away).
void BusyFor(double us) {
  auto until = std::chrono::steady_clock::now() + std::chrono::nanoseconds(int64_t(us * 1000));
  while (std::chrono::steady_clock::now() < until) {
  }
}

// Mean microseconds per ParallelFor of `per_chunk_us` work per chunk, with
// `gap_us` of serial work before each one (the code between two kernels).
double TimeDispatch(ThreadPool& pool, double per_chunk_us, double gap_us, int reps) {
  auto body = [per_chunk_us](size_t, size_t) {
    if (per_chunk_us > 0) BusyFor(per_chunk_us);
  };
  const size_t n = static_cast<size_t>(pool.size());
  double total = 0;
  for (int i = 0; i < reps; ++i) {
    if (gap_us > 0) BusyFor(gap_us);
    auto a = std::chrono::steady_clock::now();
    pool.ParallelFor(n, 1, body);
    total +=
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - a).count();
  }
  return total / reps;
}

// Not a check: prints what a fork-join costs with workers parked at once
// (spin 0, i.e. WASTE_SPIN=0) and with several spins, for empty jobs and for jobs of
// 5 µs per chunk, back to back and after a 20 µs serial gap.
TEST(ThreadPool, DispatchCost) {
  int threads = std::clamp(platform::CpuCount(), 2, 4);
  for (int spin : {0, 20, 50, 100, 1000}) {
    std::unique_ptr<ThreadPool> pool = MakePool(threads, {}, spin);
    ASSERT_NE(pool, nullptr);
    TimeDispatch(*pool, 0, 0, 1000);  // warm up
    double empty = TimeDispatch(*pool, 0, 0, 20000);
    double empty_gap = TimeDispatch(*pool, 0, 20, 5000);
    double work = TimeDispatch(*pool, 5, 0, 5000);
    double work_gap = TimeDispatch(*pool, 5, 20, 5000);
    std::cout << "[ measure  ] threads " << threads << " WASTE_SPIN=" << spin << ": empty " << empty
              << " us, empty after gap " << empty_gap << " us, 5us/chunk " << work
              << " us, 5us/chunk after gap " << work_gap << " us\n";
  }
}

}  // namespace
}  // namespace waste
