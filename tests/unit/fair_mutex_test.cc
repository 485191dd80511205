// FairMutex (src/base/fair_mutex.h): the lock goes to waiters in the order
// they asked for it, whoever released it; it works with the standard lock
// types; try_lock never jumps the queue.
#include "base/fair_mutex.h"

#include <gtest/gtest.h>

#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

namespace waste {
namespace {

TEST(FairMutex, WaitersGetTheLockInTheOrderTheyAsked) {
  FairMutex mu;
  std::mutex order_mu;
  std::vector<int> order;
  mu.lock();
  std::vector<std::thread> threads;
  constexpr int kWaiters = 6;
  for (int i = 0; i < kWaiters; ++i) {
    threads.emplace_back([&, i] {
      std::lock_guard<FairMutex> lock(mu);
      std::lock_guard<std::mutex> o(order_mu);
      order.push_back(i);
    });
    // Until thread i is queued; try_lock fails either way while the main
    // thread holds the lock, so wait on the ticket count instead.
    while (mu.waiters() < static_cast<size_t>(i + 1)) std::this_thread::yield();
  }
  mu.unlock();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(mu.waiters(), 0u);
}

// The thread that releases the lock and asks again comes after the one
// already waiting: two threads alternate strictly once both are queued.
TEST(FairMutex, AReleasingThreadQueuesBehindTheWaiter) {
  FairMutex mu;
  std::vector<int> turns;
  std::unique_lock<FairMutex> held(mu);
  std::thread other([&] {
    std::lock_guard<FairMutex> lock(mu);
    turns.push_back(1);
  });
  while (mu.waiters() < 1) std::this_thread::yield();
  turns.push_back(0);
  held.unlock();
  held.lock();  // behind `other`
  turns.push_back(0);
  held.unlock();
  other.join();
  EXPECT_EQ(turns, (std::vector<int>{0, 1, 0}));
}

TEST(FairMutex, TryLockTakesOnlyAFreeLockWithNobodyWaiting) {
  FairMutex mu;
  ASSERT_TRUE(mu.try_lock());
  EXPECT_FALSE(mu.try_lock());
  std::thread waiter([&] { std::lock_guard<FairMutex> lock(mu); });
  while (mu.waiters() < 1) std::this_thread::yield();
  mu.unlock();  // handed to the waiter
  waiter.join();
  EXPECT_TRUE(mu.try_lock());
  mu.unlock();
}

}  // namespace
}  // namespace waste
