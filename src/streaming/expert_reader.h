// Asynchronous positioned reads for the expert cache (ENGINE.md §5.3–5.4).
// One request = one whole record, read into a slot the cache owns, with no
// bounce buffer. Two backends behind one interface:
//
//   threads  N reader threads, each one pread at a time (queue depth 1 per
//            thread, the reference's scheme; every OS);
//   uring    Linux io_uring: one ring at queue depth D, submitted from the
//            calling thread, completions reaped by one thread; the cache
//            arena optionally registered as fixed buffers.
//
// Requests carry a priority class: demand reads (a layer's routed experts)
// always leave the queue before speculative (router lookahead) reads, and
// those before hotlist warm-up reads; speculative and warm-up reads occupy
// at most half the ring (all readers but one), so a demand read never
// queues behind guesses. The completion callback runs on a
// reader thread, never with the reader's own lock held; Submit never blocks
// on I/O, so callers may hold their own lock while submitting.
//
// Selection: WASTE_IO=uring|threads|sync (default uring where built and the
// kernel allows it, else threads); WASTE_IO_THREADS=0 means sync (the cache
// then reads on the calling thread and there is no reader at all);
// WASTE_IO_DEPTH = io_uring queue depth (default 8); WASTE_IO_FIXED=1
// registers the cache arena as io_uring fixed buffers (pins it at open).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "platform/platform.h"
#include "waste/status.h"

namespace waste {

enum class IoBackend : uint8_t { kSync = 0, kThreads = 1, kUring = 2 };
const char* IoBackendName(IoBackend b);

// What the environment (and the caller's thread count) asks for.
struct IoChoice {
  IoBackend backend = IoBackend::kThreads;
  int threads = 2;                   // reader threads (threads backend)
  int depth = 8;                     // requests in flight (uring backend)
  bool register_buffers = false;     // uring: register the arena as fixed buffers
};
// From the resolved options: `io_threads` (Config::io_threads /
// WASTE_IO_THREADS), `depth` (WASTE_IO_DEPTH), `backend` (WASTE_IO: "uring",
// "threads", "sync" or "" for the best available), `register_buffers`
// (WASTE_IO_FIXED).
IoChoice ResolveIoChoice(int io_threads, int depth, const std::string& backend,
                         bool register_buffers);
// True when this build has the io_uring backend and the kernel lets this
// process create a ring.
bool UringAvailable();

enum class ReadClass : uint8_t { kDemand = 0, kSpeculative = 1, kWarm = 2 };

struct ReadRequest {
  const platform::File* file = nullptr;
  uint64_t offset = 0;
  uint8_t* dst = nullptr;
  size_t bytes = 0;
  uint64_t tag = 0;                  // the caller's cookie, handed back on completion
  ReadClass cls = ReadClass::kDemand;
};

struct ReaderCounters {
  uint64_t reads = 0;                // completed requests
  uint64_t bytes = 0;                // bytes delivered by completed requests
  double busy_seconds = 0;           // wall time with at least one read in flight
  double latency_seconds = 0;        // sum over requests of submit-to-completion time
};

class ExpertReader {
 public:
  // Called once per request on a reader thread: the tag, and Ok or the
  // reason the read failed (short read, I/O error).
  using Completion = std::function<void(uint64_t tag, Status status)>;

  // `arena` (may be empty) is where every dst lies; the uring backend may
  // register it. Returns nullptr for kSync. A uring that cannot start falls
  // back to threads (reported through backend()).
  static Result<std::unique_ptr<ExpertReader>> Create(const IoChoice& choice,
                                                      std::span<uint8_t> arena,
                                                      uint64_t arena_stride, Completion done);
  virtual ~ExpertReader() = default;

  // Queues one read. Never blocks on I/O.
  virtual void Submit(const ReadRequest& r) = 0;
  // Moves a still-queued request (speculative or warm) to the demand queue:
  // someone now waits for it. No effect once it is in flight.
  virtual void Promote(uint64_t tag) = 0;
  // Waits until every submitted request has completed (tests, shutdown).
  virtual void Drain() = 0;

  virtual IoBackend backend() const = 0;
  virtual int threads() const = 0;   // reader / reaper threads
  virtual int depth() const = 0;     // requests in flight at most
  virtual bool fixed_buffers() const { return false; }
  virtual ReaderCounters counters() const = 0;
};

}  // namespace waste
