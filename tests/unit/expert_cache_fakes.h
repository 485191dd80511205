// A record source and a reader for ExpertCache unit tests: records live in a
// scratch file (so the synchronous path reads real bytes), the validator
// checks a stamp, and the fake reader completes reads when the test says so
// (or at once on its own thread), so every test is deterministic and takes
// milliseconds. Layer 0 has no experts (a dense layer); layers 1..2 have
// kExperts records of kRecordBytes each.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <deque>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "streaming/expert_cache.h"
#include "temp_dir.h"

namespace waste::testing {

constexpr int kLayers = 4;  // records in layers 1..3
constexpr int kExperts = 8;
constexpr uint64_t kRecordBytes = 4096;

using RecordId = std::pair<int, int>;  // (layer, expert)

class FakeBank {
 public:
  FakeBank() {
    path_ = dir_ / "bank.bin";
    std::vector<uint8_t> bytes((kLayers - 1) * kExperts * kRecordBytes);
    for (int layer = 1; layer < kLayers; ++layer) {
      for (int e = 0; e < kExperts; ++e) {
        uint8_t* r = bytes.data() + Offset(layer, e);
        uint32_t stamp[2] = {static_cast<uint32_t>(layer), static_cast<uint32_t>(e)};
        std::memcpy(r, stamp, sizeof(stamp));
        std::memset(r + sizeof(stamp), layer * 16 + e, kRecordBytes - sizeof(stamp));
      }
    }
    std::ofstream(path_, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()),
               static_cast<std::streamsize>(bytes.size()));
    file_ = std::move(platform::File::Open(path_).value());
  }

  static uint64_t Offset(int layer, int expert) {
    return (static_cast<uint64_t>(layer - 1) * kExperts + static_cast<uint64_t>(expert)) *
           kRecordBytes;
  }
  static RecordId Which(uint64_t offset) {
    const int i = static_cast<int>(offset / kRecordBytes);
    return {i / kExperts + 1, i % kExperts};
  }

  // Records whose location points past the end of the file (a truncated
  // bank: the read fails) and records the validator refuses (damage).
  void Truncate(RecordId id) {
    std::lock_guard<std::mutex> lock(mu_);
    truncated_.insert(id);
  }
  void Damage(RecordId id) {
    std::lock_guard<std::mutex> lock(mu_);
    damaged_.insert(id);
  }
  void Repair() {
    std::lock_guard<std::mutex> lock(mu_);
    truncated_.clear();
    damaged_.clear();
  }
  int validations() const {
    std::lock_guard<std::mutex> lock(mu_);
    return validations_;
  }

  RecordSource Source() {
    RecordSource s;
    s.layers = kLayers;
    s.experts = kExperts;
    s.max_record_bytes = kRecordBytes;
    s.locate = [this](int layer, int expert) {
      RecordLocation at;
      if (layer < 1 || layer >= kLayers || expert < 0 || expert >= kExperts) return at;
      std::lock_guard<std::mutex> lock(mu_);
      at.file = &file_;
      at.offset = truncated_.count({layer, expert}) ? file_.size() : Offset(layer, expert);
      at.bytes = kRecordBytes;
      return at;
    };
    s.validate = [this](int layer, int expert, const uint8_t* record) -> Result<ExpertRecordView> {
      std::lock_guard<std::mutex> lock(mu_);
      ++validations_;
      uint32_t stamp[2];
      std::memcpy(stamp, record, sizeof(stamp));
      if (damaged_.count({layer, expert})) {
        return IoError("record header is not what the bank index describes: test damage");
      }
      if (stamp[0] != static_cast<uint32_t>(layer) || stamp[1] != static_cast<uint32_t>(expert)) {
        return IoError("stamp mismatch: the cache read the wrong record");
      }
      ExpertRecordView v;
      v.gate = record;
      v.codebook_id = layer * 100 + expert;
      return v;
    };
    return s;
  }

 private:
  TempDir dir_;
  std::string path_;
  platform::File file_;
  mutable std::mutex mu_;
  std::set<RecordId> truncated_, damaged_;
  int validations_ = 0;
};

// Completes reads in submission order, either when the test calls
// CompleteAll() (held) or at once on its own thread (auto). Remembers every
// request's class and every promotion.
class FakeReader final : public ExpertReader {
 public:
  struct Logged {
    RecordId id;
    ReadClass cls;
  };

  FakeReader(Completion done, bool auto_complete)
      : done_(std::move(done)), auto_(auto_complete), worker_([this] { Loop(); }) {}
  ~FakeReader() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  void Submit(const ReadRequest& r) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(r);
      log_.push_back({FakeBank::Which(r.offset), r.cls});
    }
    cv_.notify_all();
  }
  void Promote(uint64_t tag) override {
    std::lock_guard<std::mutex> lock(mu_);
    for (ReadRequest& r : queue_) {
      if (r.tag == tag) {
        r.cls = ReadClass::kDemand;
        promoted_.push_back(FakeBank::Which(r.offset));
      }
    }
  }
  void Drain() override {
    CompleteAll();
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return queue_.empty() && busy_ == 0; });
  }
  IoBackend backend() const override { return IoBackend::kThreads; }
  int threads() const override { return 1; }
  int depth() const override { return 1; }
  ReaderCounters counters() const override { return {}; }

  // Reads of `id` fail with an I/O error (a device error, not a truncation).
  void FailReads(RecordId id) {
    std::lock_guard<std::mutex> lock(mu_);
    failing_.insert(id);
  }
  // Completes every queued read on the calling thread; returns how many.
  int CompleteAll() {
    int n = 0;
    while (CompleteOne()) ++n;
    return n;
  }
  size_t queued() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
  }
  std::vector<Logged> log() const {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  std::vector<RecordId> promoted() const {
    std::lock_guard<std::mutex> lock(mu_);
    return promoted_;
  }

 private:
  bool CompleteOne() {
    ReadRequest r;
    bool fail;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (queue_.empty()) return false;
      r = queue_.front();
      queue_.pop_front();
      fail = failing_.count(FakeBank::Which(r.offset)) > 0;
      ++busy_;
    }
    Status st = fail ? IoError("read failed: injected device error")
                     : r.file->ReadAt(r.offset, r.dst, r.bytes);
    done_(r.tag, st);
    {
      std::lock_guard<std::mutex> lock(mu_);
      --busy_;
    }
    cv_.notify_all();
    return true;
  }
  void Loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || (auto_ && !queue_.empty()); });
        if (stop_) return;
      }
      CompleteOne();
    }
  }

  Completion done_;
  const bool auto_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<ReadRequest> queue_;
  std::vector<Logged> log_;
  std::vector<RecordId> promoted_;
  std::set<RecordId> failing_;
  int busy_ = 0;
  bool stop_ = false;
  std::thread worker_;
};

enum class Mode { kSync, kAutoReader, kHeldReader };

// One cache over a FakeBank with `slots` record-sized slots.
struct Harness {
  FakeBank bank;
  FakeReader* reader = nullptr;  // owned by the cache; null in kSync
  std::unique_ptr<ExpertCache> cache;

  Harness(uint64_t slots, Replacement policy, Mode mode) {
    ExpertCacheOptions o;
    o.policy = policy;
    o.huge_pages = false;
    o.make_reader = [this, mode](
                        std::span<uint8_t>, uint64_t,
                        ExpertReader::Completion done) -> Result<std::unique_ptr<ExpertReader>> {
      if (mode == Mode::kSync) return std::unique_ptr<ExpertReader>();
      auto r = std::make_unique<FakeReader>(std::move(done), mode == Mode::kAutoReader);
      reader = r.get();
      return std::unique_ptr<ExpertReader>(std::move(r));
    };
    cache =
        std::move(ExpertCache::Create(bank.Source(), SlotLayout{kRecordBytes, slots}, o).value());
  }
};

}  // namespace waste::testing
