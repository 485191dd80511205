#include "engine_worker.h"

#include <algorithm>

namespace waste::server {

EngineWorker::EngineWorker(Engine& engine, size_t concurrency, size_t max_waiting)
    : engine_(engine), max_waiting_(max_waiting) {
  concurrency = std::max<size_t>(1, concurrency);
  for (size_t i = 0; i < concurrency; ++i) threads_.emplace_back([this] { Loop(); });
}

EngineWorker::~EngineWorker() { Join(); }

void EngineWorker::Join() {
  Shutdown();
  std::lock_guard<std::mutex> lock(join_mu_);
  for (std::thread& t : threads_) {
    if (t.joinable()) t.join();
  }
}

void EngineWorker::Shutdown() {
  std::deque<std::pair<Job, Drop>> dropped;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    dropped.swap(queue_);
  }
  cv_.notify_all();
  for (auto& [job, drop] : dropped) {
    if (!drop) continue;
    try {
      drop();
    } catch (...) {
    }
  }
}

bool EngineWorker::stopping() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stopping_;
}

bool EngineWorker::Submit(Job job, Drop drop) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // As many queued jobs as there are idle threads start at once; the
    // rest wait. A thread in background work counts as idle: the job queued
    // for it makes that work give way (http_server.cc, FollowOn), so even
    // `--queue 0` admits it.
    const size_t idle = threads_.size() - (running_.load() - background_);
    if (stopping_ || queue_.size() >= max_waiting_ + idle) return false;
    queue_.emplace_back(std::move(job), std::move(drop));
  }
  cv_.notify_one();
  return true;
}

size_t EngineWorker::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_.load() - background_;
}

EngineWorker::Background::Background(EngineWorker& worker) : worker_(worker) {
  std::lock_guard<std::mutex> lock(worker_.mu_);
  ++worker_.background_;
}

EngineWorker::Background::~Background() {
  std::lock_guard<std::mutex> lock(worker_.mu_);
  --worker_.background_;
}

size_t EngineWorker::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

void EngineWorker::Loop() {
  while (true) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping (the queue was dropped)
      job = std::move(queue_.front().first);
      queue_.pop_front();
      ++running_;
    }
    // A job reports its own failures; nothing it does may end this thread.
    try {
      job(engine_);
    } catch (...) {
    }
    job = nullptr;  // what the job holds goes before it counts as done
    {
      std::lock_guard<std::mutex> lock(mu_);
      --running_;
    }
  }
}

}  // namespace waste::server
