// A mutex that is handed over in the order it was asked for (a ticket
// lock). The model's run lock is one: sessions of one model take turns at
// the network a step at a time (include/waste/model.h), and with a plain
// std::mutex the thread that just released it usually takes it straight
// back (it is running; the waiter must first be woken), so one stream could
// starve another for many tokens. Here every lock() takes a ticket and
// waits for its number; unlock() calls the next one. Waiters are few (one
// per concurrent session), so a notify_all per hand-over costs nothing next
// to a forward step.
//
// Meets the standard's Lockable requirements: std::lock_guard and
// std::unique_lock work with it.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

namespace waste {

class FairMutex {
 public:
  FairMutex() = default;
  FairMutex(const FairMutex&) = delete;
  FairMutex& operator=(const FairMutex&) = delete;

  void lock() {
    std::unique_lock<std::mutex> lock(mu_);
    const uint64_t ticket = next_++;
    turn_.wait(lock, [&] { return serving_ == ticket; });
  }
  bool try_lock() {
    std::lock_guard<std::mutex> lock(mu_);
    if (serving_ != next_) return false;  // held, or others are waiting their turn
    ++next_;
    return true;
  }
  // Tickets taken and not yet served, less the one whose turn it is: the
  // threads waiting behind the holder (for tests and diagnostics).
  size_t waiters() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<size_t>(next_ - serving_) - (next_ > serving_ ? 1 : 0);
  }
  void unlock() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++serving_;
    }
    turn_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable turn_;
  uint64_t next_ = 0;     // the ticket the next lock() takes
  uint64_t serving_ = 0;  // the ticket that holds (or may take) the lock
};

}  // namespace waste
