#include "streaming/arena_prefault.h"

#include <algorithm>

#include "platform/platform.h"

namespace waste {
namespace {

constexpr size_t kStep = size_t{2} << 20;  // one huge page per call

}  // namespace

std::unique_ptr<ArenaPrefault> ArenaPrefault::Start(uint8_t* arena, size_t bytes, size_t ahead) {
  if (ahead == 0 || bytes == 0) return nullptr;
  // Probe once on the first step: where the OS cannot populate, no thread.
  if (!platform::PopulatePages(arena, std::min(bytes, kStep))) return nullptr;
  std::unique_ptr<ArenaPrefault> p(new ArenaPrefault(arena, bytes, ahead));
  p->done_ = std::min(bytes, kStep);
  p->target_ = std::min(bytes, ahead);
  p->thread_ = std::thread([raw = p.get()] { raw->Run(); });
  return p;
}

ArenaPrefault::ArenaPrefault(uint8_t* arena, size_t bytes, size_t ahead)
    : arena_(arena), bytes_(bytes), ahead_(ahead) {}

ArenaPrefault::~ArenaPrefault() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void ArenaPrefault::InUse(size_t end) {
  const size_t want = std::min(bytes_, end + ahead_);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (want <= target_) return;
    target_ = want;
  }
  cv_.notify_one();
}

size_t ArenaPrefault::populated() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void ArenaPrefault::Run() {
  platform::LowerCurrentThreadPriority();
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || done_ < target_; });
    if (stop_) return;
    const size_t begin = done_;
    const size_t end = std::min(target_, begin + kStep);
    lock.unlock();
    // A failure (the kernel out of memory) leaves the pages to their first
    // toucher, as without this thread.
    const bool ok = platform::PopulatePages(arena_ + begin, end - begin);
    lock.lock();
    done_ = ok ? end : bytes_;
    if (!ok) target_ = bytes_;
  }
}

}  // namespace waste
