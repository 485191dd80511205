#include "engine_worker.h"

namespace waste::server {

EngineWorker::EngineWorker(Engine& engine, size_t max_waiting)
    : engine_(engine), max_waiting_(max_waiting), thread_([this] { Loop(); }) {}

EngineWorker::~EngineWorker() {
  Shutdown();
  thread_.join();
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
    if (stopping_ || queue_.size() >= max_waiting_ + (busy_.load() ? 0 : 1)) return false;
    queue_.emplace_back(std::move(job), std::move(drop));
  }
  cv_.notify_one();
  return true;
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
      busy_ = true;
    }
    // A job reports its own failures; nothing it does may end this thread.
    try {
      job(engine_);
    } catch (...) {
    }
    busy_ = false;
  }
}

}  // namespace waste::server
