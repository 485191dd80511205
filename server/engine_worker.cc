#include "engine_worker.h"

namespace waste::server {

EngineWorker::EngineWorker(Engine& engine, size_t max_waiting)
    : engine_(engine), max_waiting_(max_waiting), thread_([this] { Loop(); }) {}

EngineWorker::~EngineWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool EngineWorker::Submit(Job job) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_ || queue_.size() >= max_waiting_ + (busy_.load() ? 0 : 1)) return false;
    queue_.push_back(std::move(job));
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
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
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
