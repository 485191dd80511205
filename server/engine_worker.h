// The one thread that drives the engine. Requests are validated and
// tokenized on their own HTTP threads, then queued here and run strictly
// first in, first out, one at a time (the engine has one conversation
// state). A full queue refuses at once, so the HTTP layer can answer 503
// with Retry-After instead of holding the connection.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

#include "waste/waste.h"

namespace waste::server {

class EngineWorker {
 public:
  using Job = std::function<void(Engine&)>;

  // `max_waiting`: jobs that may wait behind the running one.
  EngineWorker(Engine& engine, size_t max_waiting);
  ~EngineWorker();
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // False when the queue is full (the job is not run).
  bool Submit(Job job);
  size_t waiting() const;
  bool busy() const { return busy_.load(); }

 private:
  void Loop();

  Engine& engine_;
  size_t max_waiting_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Job> queue_;
  bool stopping_ = false;
  std::atomic<bool> busy_{false};
  std::thread thread_;
};

}  // namespace waste::server
