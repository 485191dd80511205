// The one thread that drives the engine. Requests are validated and
// tokenized on their own HTTP threads, then queued here and run strictly
// first in, first out, one at a time (the engine has one conversation
// state). A full queue refuses at once, so the HTTP layer can answer 503
// with Retry-After instead of holding the connection. Shutdown() refuses
// new jobs and drops the queued ones (each told so through its `drop`
// callback), leaving only the running one, which its owner cancels.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>

#include "waste/waste.h"

namespace waste::server {

class EngineWorker {
 public:
  using Job = std::function<void(Engine&)>;
  // Called instead of the job when the worker shuts down before running it.
  using Drop = std::function<void()>;

  // `max_waiting`: jobs that may wait behind the running one.
  EngineWorker(Engine& engine, size_t max_waiting);
  ~EngineWorker();
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // False when the queue is full or the worker is shutting down (the job
  // is not run, `drop` is not called).
  bool Submit(Job job, Drop drop = {});
  // Refuses new jobs and calls the `drop` of every queued one (on this
  // thread); the running job is left to finish. Idempotent; the
  // destructor calls it, then waits for the running job.
  void Shutdown();
  bool stopping() const;
  size_t waiting() const;
  bool busy() const { return busy_.load(); }

 private:
  void Loop();

  Engine& engine_;
  size_t max_waiting_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Job, Drop>> queue_;
  bool stopping_ = false;
  std::atomic<bool> busy_{false};
  std::thread thread_;
};

}  // namespace waste::server
