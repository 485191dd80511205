// Config: what a host chooses when opening a model. Zero / empty means
// "engine chooses" (environment variables fill defaults; an explicit value
// always wins over the environment, ENGINE.md §2).
#pragma once

#include <cstdint>
#include <string>

namespace waste {

enum class CachePolicy : uint8_t { kLfru = 0, kLru = 1 };

struct Config {
  uint64_t ram_budget_bytes = 0;     // 0 = default rule (ENGINE.md §4.3)
  uint32_t ctx_tokens = 4096;        // MLA context capacity
  int threads = 0;                   // 0 = WASTE_THREADS, else CPU count
  std::string cpu_list;              // "0-5,8"; empty = WASTE_CPUS, else unbound
  bool verify_records = false;       // crc32 every record read (OR with WASTE_VERIFY)
  int direct_io = -1;                // -1 = WASTE_DIRECT (default on), 0 off, 1 on
  int lookahead = -1;                // -1 = WASTE_LOOKAHEAD (default 6)
  int io_threads = -1;               // -1 = WASTE_IO_THREADS (default 2)
  CachePolicy cache_policy = CachePolicy::kLfru;
  std::string usage_path;            // hotlist; empty = <container>/usage.waste
  bool exclusive_open = false;
  bool force_baseline_kernels = false;  // like WASTE_BACKEND=cpu
  // Load the vision tower (if the container has one) so images can be
  // attached; its memory is added to the plan's floor. Off: the tower's
  // bytes are never read and every image call is kUnsupported.
  bool vision = false;
};

}  // namespace waste
