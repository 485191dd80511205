// First touch of the expert cache arena off the critical path. A fresh
// slot's pages are faulted in (zero-filled, for huge pages compacted) by
// whoever touches them first — without this, the reader that lands the
// first record in them, while the step waits: on a multi-GB cache that was
// most of a cold big-budget run's system time (docs/PERFORMANCE.md, "Round
// two"). The cache hands out never-used slots in ascending order, so this
// background thread, at the lowest priority (idle CPU only), keeps a window
// of `ahead` bytes past the highest slot handed out populated. Populating
// never writes (platform::PopulatePages), so it is safe on slots in use;
// results never depend on it. A no-op where the OS cannot populate.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>

namespace waste {

class ArenaPrefault {
 public:
  // Null when `ahead` is 0 or the OS cannot populate pages.
  static std::unique_ptr<ArenaPrefault> Start(uint8_t* arena, size_t bytes, size_t ahead);
  ~ArenaPrefault();  // stops and joins
  ArenaPrefault(const ArenaPrefault&) = delete;
  ArenaPrefault& operator=(const ArenaPrefault&) = delete;

  // Bytes [0, end) of the arena are in use or about to be: keep `ahead`
  // more populated. Cheap (no lock unless it moves the target).
  void InUse(size_t end);
  // Bytes populated so far (tests, bench).
  size_t populated() const;

 private:
  ArenaPrefault(uint8_t* arena, size_t bytes, size_t ahead);
  void Run();

  uint8_t* arena_;
  size_t bytes_, ahead_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  size_t target_ = 0;  // populate up to here (guarded by mu_)
  size_t done_ = 0;    // populated up to here (guarded by mu_)
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace waste
