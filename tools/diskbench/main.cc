// waste-diskbench: cache-bypass random reads of record-sized blocks, the
// access pattern of expert streaming (ENGINE.md §5.3–5.4), so the engine's
// achieved read bandwidth can be compared with what the disk gives.
//
//   waste-diskbench PATH... [--block BYTES] [--threads 1,2,4] [--depth 1,2,4,8]
//                   [--engine pread|uring|both] [--seconds S] [--json]
//
// PATH is a file or a container directory (all its experts-L*.bin banks;
// the block then defaults to the container's record size). Offsets are
// whole blocks (block index × block), uniformly random over every file.
//   pread  T threads, each one read at a time (queue depth 1 per thread;
//          --depth is ignored) — the engine's thread reader;
//   uring  T threads, each with its own io_uring at queue depth D — the
//          engine's io_uring reader is T = 1.
// Refuses to report (exit 1) when the page cache is not bypassed for a
// file: a buffered figure measures RAM, not the disk.
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "container/container.h"
#include "platform/platform.h"

#if defined(WASTE_HAVE_IO_URING)
#include <liburing.h>
#endif

namespace {

using Clock = std::chrono::steady_clock;
using waste::platform::File;

constexpr uint64_t kDefaultBlock = 2666496;  // a Kimi-Linear VQ3R record

constexpr const char* kUsage =
    "usage: waste-diskbench PATH... [--block BYTES] [--threads LIST] [--depth LIST]\n"
    "                       [--engine pread|uring|both] [--seconds S] [--json]\n"
    "  PATH         a file, or a container directory (its experts-L*.bin banks)\n"
    "  --block      bytes per read, a multiple of 4096 (default: the container's\n"
    "               record size, else 2666496)\n"
    "  --threads    comma list of thread counts (default 1,2,4)\n"
    "  --depth      comma list of io_uring queue depths per thread (default 1,2,4,8,16)\n"
    "  --engine     pread, uring or both (default both where io_uring works)\n"
    "  --seconds    measuring time per configuration (default 3)\n"
    "  --json       one JSON object on stdout\n";

struct Target {
  File file;
  uint64_t blocks = 0;
};

struct Result {
  std::string engine;
  int threads = 0;
  int depth = 0;
  uint64_t reads = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  double lat_mean_ms = 0;
  double lat_p50_ms = 0;
  double lat_p99_ms = 0;
  std::string error;
  double gbps() const { return seconds > 0 ? double(bytes) / 1e9 / seconds : 0; }
};

bool ParseList(std::string_view s, std::vector<int>* out) {
  out->clear();
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string item(s.substr(pos, comma == std::string_view::npos ? s.npos : comma - pos));
    char* end = nullptr;
    long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 256) return false;
    out->push_back(static_cast<int>(v));
    if (comma == std::string_view::npos) break;
    pos = comma + 1;
  }
  return !out->empty();
}

// Picks (file, offset) uniformly over every block of every target.
class Picker {
 public:
  Picker(const std::vector<Target>& t, uint64_t block, uint64_t seed)
      : t_(t), block_(block), rng_(seed) {
    for (const Target& x : t) total_ += x.blocks;
  }
  std::pair<const File*, uint64_t> Next() {
    uint64_t i = std::uniform_int_distribution<uint64_t>(0, total_ - 1)(rng_);
    for (const Target& x : t_) {
      if (i < x.blocks) return {&x.file, i * block_};
      i -= x.blocks;
    }
    return {&t_[0].file, 0};
  }

 private:
  const std::vector<Target>& t_;
  uint64_t block_;
  uint64_t total_ = 0;
  std::mt19937_64 rng_;
};

void Summarise(std::vector<double>& lat, Result* r) {
  if (lat.empty()) return;
  std::sort(lat.begin(), lat.end());
  double sum = 0;
  for (double v : lat) sum += v;
  r->lat_mean_ms = 1000 * sum / double(lat.size());
  r->lat_p50_ms = 1000 * lat[lat.size() / 2];
  r->lat_p99_ms = 1000 * lat[std::min(lat.size() - 1, lat.size() * 99 / 100)];
}

// One timed run's shared state: per-thread latencies and read counts, the
// first error (which stops every thread), and the deadline.
struct RunState {
  RunState(int threads, double seconds)
      : lat(static_cast<size_t>(threads)),
        reads(static_cast<size_t>(threads), 0),
        start(Clock::now()),
        stop(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds))) {}
  bool running() const { return !failed && Clock::now() < stop; }
  void Fail(std::string why) {
    if (!failed.exchange(true)) error = std::move(why);
  }
  void Read(int t, Clock::time_point t0) {
    lat[static_cast<size_t>(t)].push_back(std::chrono::duration<double>(Clock::now() - t0).count());
    ++reads[static_cast<size_t>(t)];
  }
  // After the worker threads joined: totals, bandwidth and latency summary.
  void Collect(uint64_t block, Result* r) {
    r->seconds = std::chrono::duration<double>(Clock::now() - start).count();
    std::vector<double> all;
    for (size_t t = 0; t < lat.size(); ++t) {
      r->reads += reads[t];
      all.insert(all.end(), lat[t].begin(), lat[t].end());
    }
    r->bytes = r->reads * block;
    r->error = error;
    Summarise(all, r);
  }

  std::vector<std::vector<double>> lat;
  std::vector<uint64_t> reads;
  std::atomic<bool> failed{false};
  std::string error;
  const Clock::time_point start;
  const Clock::time_point stop;
};

Result RunPread(const std::vector<Target>& targets, uint64_t block, int threads, double seconds) {
  Result r;
  r.engine = "pread";
  r.threads = threads;
  r.depth = 1;
  RunState run(threads, seconds);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      waste::platform::AlignedPtr<uint8_t> buf(
          static_cast<uint8_t*>(waste::platform::AlignedAlloc(4096, block)));
      Picker pick(targets, block, 0x5eed + static_cast<uint64_t>(t));
      while (run.running()) {
        auto [f, off] = pick.Next();
        Clock::time_point t0 = Clock::now();
        waste::Status st = f->ReadAt(off, buf.get(), block);
        if (!st.ok()) {
          run.Fail(st.message());
          return;
        }
        run.Read(t, t0);
      }
    });
  }
  for (std::thread& th : pool) th.join();
  run.Collect(block, &r);
  return r;
}

#if defined(WASTE_HAVE_IO_URING)
Result RunUring(const std::vector<Target>& targets, uint64_t block, int threads, int depth,
                double seconds) {
  Result r;
  r.engine = "uring";
  r.threads = threads;
  r.depth = depth;
  RunState run(threads, seconds);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      io_uring ring;
      unsigned entries = 1;
      while (entries < static_cast<unsigned>(depth)) entries *= 2;
      int rc = io_uring_queue_init(entries, &ring, 0);
      if (rc < 0) {
        run.Fail(fmt::format("io_uring_queue_init: {}", std::strerror(-rc)));
        return;
      }
      std::vector<waste::platform::AlignedPtr<uint8_t>> bufs;
      std::vector<Clock::time_point> issued(static_cast<size_t>(depth));
      for (int d = 0; d < depth; ++d) {
        bufs.emplace_back(static_cast<uint8_t*>(waste::platform::AlignedAlloc(4096, block)));
      }
      Picker pick(targets, block, 0x5eed + static_cast<uint64_t>(t));
      auto issue = [&](int d) {
        auto [f, off] = pick.Next();
        io_uring_sqe* sqe = io_uring_get_sqe(&ring);
        io_uring_prep_read(sqe, static_cast<int>(f->native_handle()), bufs[size_t(d)].get(),
                           static_cast<unsigned>(block), off);
        io_uring_sqe_set_data64(sqe, static_cast<uint64_t>(d));
        issued[static_cast<size_t>(d)] = Clock::now();
      };
      for (int d = 0; d < depth; ++d) issue(d);
      io_uring_submit(&ring);
      int inflight = depth;
      while (inflight > 0) {
        io_uring_cqe* cqe = nullptr;
        rc = io_uring_wait_cqe(&ring, &cqe);
        if (rc == -EINTR) continue;
        if (rc < 0) {
          run.Fail(fmt::format("io_uring_wait_cqe: {}", std::strerror(-rc)));
          break;
        }
        int d = static_cast<int>(io_uring_cqe_get_data64(cqe));
        int res = cqe->res;
        io_uring_cqe_seen(&ring, cqe);
        --inflight;
        if (res != static_cast<int>(block)) {
          run.Fail(res < 0 ? fmt::format("read: {}", std::strerror(-res))
                           : fmt::format("short read: {} of {} bytes", res, block));
          continue;
        }
        run.Read(t, issued[static_cast<size_t>(d)]);
        if (run.running()) {
          issue(d);
          io_uring_submit(&ring);
          ++inflight;
        }
      }
      io_uring_queue_exit(&ring);
    });
  }
  for (std::thread& th : pool) th.join();
  run.Collect(block, &r);
  return r;
}

bool UringWorks() {
  io_uring ring;
  if (io_uring_queue_init(2, &ring, 0) != 0) return false;
  io_uring_queue_exit(&ring);
  return true;
}
#endif

int Usage(const std::string& why) {
  if (!why.empty()) std::fprintf(stderr, "waste-diskbench: %s\n", why.c_str());
  std::fputs(kUsage, stderr);
  return 2;
}

int Run(int argc, char** argv) {
  std::vector<std::string> paths;
  uint64_t block = 0;
  std::vector<int> threads = {1, 2, 4};
  std::vector<int> depths = {1, 2, 4, 8, 16};
  std::string engine = "both";
  double seconds = 3;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--block") {
      const char* v = value();
      char* end = nullptr;
      if (v == nullptr) return Usage("--block needs a size");
      block = std::strtoull(v, &end, 10);
      if (end == v || *end != '\0' || block == 0 || block % 4096 != 0) {
        return Usage("--block must be a positive multiple of 4096");
      }
    } else if (a == "--threads") {
      const char* v = value();
      if (v == nullptr || !ParseList(v, &threads)) return Usage("--threads needs a list like 1,2,4");
    } else if (a == "--depth") {
      const char* v = value();
      if (v == nullptr || !ParseList(v, &depths)) return Usage("--depth needs a list like 1,4,8");
    } else if (a == "--engine") {
      const char* v = value();
      if (v == nullptr) return Usage("--engine needs pread, uring or both");
      engine = v;
      if (engine != "pread" && engine != "uring" && engine != "both") {
        return Usage("--engine must be pread, uring or both");
      }
    } else if (a == "--seconds") {
      const char* v = value();
      char* end = nullptr;
      if (v == nullptr) return Usage("--seconds needs a number");
      seconds = std::strtod(v, &end);
      if (end == v || *end != '\0' || seconds <= 0) return Usage("--seconds must be > 0");
    } else if (a == "--json") {
      json = true;
    } else if (a == "-h" || a == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return Usage(fmt::format("unknown option {}", a));
    } else {
      paths.emplace_back(a);
    }
  }
  if (paths.empty()) return Usage("no file or container given");

  // Expand container directories into their banks; take the record size.
  std::vector<std::string> files;
  for (const std::string& p : paths) {
    std::error_code ec;
    if (std::filesystem::is_directory(p, ec)) {
      auto text = waste::platform::ReadWholeFile(p + "/manifest.json");
      if (text) {
        auto m = waste::ParseManifest(*text, p + "/manifest.json");
        if (m) {
          for (const waste::BankInfo& b : m->banks) {
            if (b.layer < 0) continue;
            files.push_back(p + "/" + b.file);
            if (block == 0) block = b.record_bytes;
          }
          continue;
        }
      }
      for (const auto& e : std::filesystem::directory_iterator(p, ec)) {
        std::string name = e.path().filename().string();
        if (name.rfind("experts-L", 0) == 0) files.push_back(e.path().string());
      }
    } else {
      files.push_back(p);
    }
  }
  if (files.empty()) {
    std::fprintf(stderr, "waste-diskbench: no files to read\n");
    return 1;
  }
  if (block == 0) block = kDefaultBlock;
  if (block % 4096 != 0) {
    std::fprintf(stderr, "waste-diskbench: block of %llu bytes is not a multiple of 4096\n",
                 static_cast<unsigned long long>(block));
    return 1;
  }

  std::vector<Target> targets;
  uint64_t total_bytes = 0;
  for (const std::string& f : files) {
    auto opened = File::OpenBypass(f);
    if (!opened) {
      std::fprintf(stderr, "waste-diskbench: %s\n", opened.error().message().c_str());
      return 1;
    }
    if (!opened->bypass()) {
      std::fprintf(stderr,
                   "waste-diskbench: %s: this filesystem refuses cache-bypass reads (O_DIRECT);\n"
                   "  a buffered figure would measure the page cache, not the disk. Not reporting.\n",
                   f.c_str());
      return 1;
    }
    Target t;
    t.blocks = opened->size() / block;
    total_bytes += t.blocks * block;
    t.file = std::move(*opened);
    if (t.blocks > 0) targets.push_back(std::move(t));
  }
  if (targets.empty()) {
    std::fprintf(stderr, "waste-diskbench: every file is smaller than one block\n");
    return 1;
  }

  bool want_pread = engine != "uring";
  bool want_uring = engine != "pread";
#if defined(WASTE_HAVE_IO_URING)
  if (want_uring && !UringWorks()) {
    if (engine == "uring") {
      std::fprintf(stderr, "waste-diskbench: io_uring is not available to this process\n");
      return 1;
    }
    want_uring = false;
  }
#else
  if (engine == "uring") {
    std::fprintf(stderr, "waste-diskbench: built without io_uring\n");
    return 1;
  }
  want_uring = false;
#endif

  if (!json) {
    std::printf("cache-bypass random reads of %llu-byte blocks over %zu file%s (%.2f GB)\n\n",
                static_cast<unsigned long long>(block), targets.size(),
                targets.size() == 1 ? "" : "s", double(total_bytes) / 1e9);
    std::printf("  engine  threads  depth      GB/s     reads/s   mean ms    p50 ms    p99 ms\n");
  }
  std::vector<Result> results;
  auto report = [&](const Result& r) {
    if (!r.error.empty()) {
      std::fprintf(stderr, "waste-diskbench: %s (threads %d, depth %d): %s\n", r.engine.c_str(),
                   r.threads, r.depth, r.error.c_str());
      return false;
    }
    results.push_back(r);
    if (!json) {
      std::printf("  %-6s  %7d  %5d  %8.3f  %10.1f  %8.2f  %8.2f  %8.2f\n", r.engine.c_str(),
                  r.threads, r.depth, r.gbps(), double(r.reads) / r.seconds, r.lat_mean_ms,
                  r.lat_p50_ms, r.lat_p99_ms);
      std::fflush(stdout);
    }
    return true;
  };
  for (int t : threads) {
    if (want_pread && !report(RunPread(targets, block, t, seconds))) return 1;
#if defined(WASTE_HAVE_IO_URING)
    if (want_uring) {
      for (int d : depths) {
        if (!report(RunUring(targets, block, t, d, seconds))) return 1;
      }
    }
#endif
  }
  if (json) {
    std::string out = fmt::format(
        "{{\"block\":{},\"files\":{},\"bytes\":{},\"direct_io\":true,\"seconds\":{},\"results\":[",
        block, targets.size(), total_bytes, seconds);
    for (size_t i = 0; i < results.size(); ++i) {
      const Result& r = results[i];
      out += fmt::format(
          "{}{{\"engine\":\"{}\",\"threads\":{},\"depth\":{},\"reads\":{},\"gbps\":{:.4f},"
          "\"lat_mean_ms\":{:.3f},\"lat_p50_ms\":{:.3f},\"lat_p99_ms\":{:.3f}}}",
          i == 0 ? "" : ",", r.engine, r.threads, r.depth, r.reads, r.gbps(), r.lat_mean_ms,
          r.lat_p50_ms, r.lat_p99_ms);
    }
    out += "]}";
    std::printf("%s\n", out.c_str());
  } else {
    const Result* best = nullptr;
    for (const Result& r : results) {
      if (best == nullptr || r.gbps() > best->gbps()) best = &r;
    }
    if (best != nullptr) {
      std::printf("\n  best: %s, %d thread%s, depth %d: %.3f GB/s\n", best->engine.c_str(),
                  best->threads, best->threads == 1 ? "" : "s", best->depth, best->gbps());
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "waste-diskbench: %s\n", e.what());
    return 1;
  }
}
