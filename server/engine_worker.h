// The threads that drive the engine. Requests are validated and tokenized
// on their own HTTP threads, then queued here and started first in, first
// out, up to `concurrency` at a time (one per conversation slot,
// `--parallel`). Running requests share the model a forward step at a
// time: the engine hands its run lock over in turn (include/waste/model.h),
// so concurrent streams advance token by token, each on its own session,
// each with the tokens it would get alone. A full queue refuses at once,
// so the HTTP layer can answer 503 with Retry-After instead of holding the
// connection. Shutdown() refuses new jobs and drops the queued ones (each
// told so through its `drop` callback), leaving the running ones, which
// their owners cancel.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "waste/waste.h"

namespace waste::server {

class EngineWorker {
 public:
  using Job = std::function<void(Engine&)>;
  // Called instead of the job when the worker shuts down before running it.
  using Drop = std::function<void()>;

  // `concurrency` (>= 1): jobs run at once; `max_waiting`: jobs that may
  // wait behind them.
  EngineWorker(Engine& engine, size_t concurrency, size_t max_waiting);
  ~EngineWorker();
  EngineWorker(const EngineWorker&) = delete;
  EngineWorker& operator=(const EngineWorker&) = delete;

  // False when the queue is full or the worker is shutting down (the job
  // is not run, `drop` is not called).
  bool Submit(Job job, Drop drop = {});
  // Refuses new jobs and calls the `drop` of every queued one (on this
  // thread); the running jobs are left to finish. Idempotent; the
  // destructor calls it, then waits for the running jobs.
  void Shutdown();
  // Shutdown, then waits for the running jobs to end (their threads exit).
  // Idempotent; the object stays usable (Submit refuses).
  void Join();
  bool stopping() const;
  size_t waiting() const;
  // Jobs running, not counting those in background work.
  size_t running() const;
  size_t concurrency() const { return threads_.size(); }

  // Held by a job while it does background work after its request was
  // answered (the follow-on prefill, session_pool.h): running() does not
  // count it, so that work can give way to any request that runs or
  // waits, and Submit counts its thread as idle (a job it admits for that
  // thread waits in the queue, which is what makes the work give way).
  class Background {
   public:
    explicit Background(EngineWorker& worker);
    ~Background();
    Background(const Background&) = delete;
    Background& operator=(const Background&) = delete;

   private:
    EngineWorker& worker_;
  };

 private:
  void Loop();

  Engine& engine_;
  size_t max_waiting_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<Job, Drop>> queue_;
  bool stopping_ = false;
  std::atomic<size_t> running_{0};  // jobs running (changed under mu_)
  size_t background_ = 0;           // of those, in background work (under mu_)
  std::mutex join_mu_;  // one Join at a time
  std::vector<std::thread> threads_;
};

}  // namespace waste::server
