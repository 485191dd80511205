// Config: what a host chooses when opening a model. Zero / empty means
// "engine chooses" (environment variables fill defaults; an explicit value
// always wins over the environment, ENGINE.md §2).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace waste {

// Expert cache replacement. kDefault is the engine's choice: reuse-odds
// (evicts the record expected to be needed last, from learned reuse odds,
// and reads lookahead guesses only for ranks that have been right), unless
// WASTE_CACHE_POLICY names another. Results never depend on the policy;
// bytes read and speed do (docs/PERFORMANCE.md).
enum class CachePolicy : uint8_t { kLfru = 0, kLru = 1, kReuseOdds = 2, kDefault = 3 };

enum class LogLevel : uint8_t { kInfo = 0, kWarning = 1 };
// Where the library's warnings go (it never prints). Called on the thread
// that made the call; must not throw.
using LogSink = std::function<void(LogLevel, std::string_view)>;

struct Config {
  uint64_t ram_budget_bytes = 0;     // 0 = default rule (ENGINE.md §4.3)
  uint32_t ctx_tokens = 4096;        // MLA context capacity of each session
  // Sessions the budget keeps room for (each: state + scratch at
  // ctx_tokens); the expert cache gets what is left. Model::NewSession
  // refuses a session beyond this reserve. 0 is taken as 1.
  uint32_t max_sessions = 1;
  // In-RAM snapshots (Session::Snapshot) the budget keeps room for, each at
  // most one session's state at ctx_tokens (no scratch), for a host that
  // keeps them. The host keeps their number within it.
  uint32_t max_snapshots = 0;
  int threads = 0;                   // 0 = WASTE_THREADS, else CPU count
  std::string cpu_list;              // "0-5,8"; empty = WASTE_CPUS, else unbound
  bool verify_records = false;       // crc32 every record read (OR with WASTE_VERIFY)
  int direct_io = -1;                // -1 = WASTE_DIRECT (default on), 0 off, 1 on
  int lookahead = -1;                // -1 = WASTE_LOOKAHEAD (default 6)
  int io_threads = -1;               // -1 = WASTE_IO_THREADS (default 2)
  CachePolicy cache_policy = CachePolicy::kDefault;
  std::string usage_path;            // hotlist; empty = <container>/usage.waste
  bool exclusive_open = false;
  bool force_baseline_kernels = false;  // like WASTE_BACKEND=cpu
  // Warnings (a budget that leaves under a quarter of usable RAM, buffered
  // reads where cache-bypass reads were asked for); empty = dropped.
  LogSink log;
  // Load the vision tower (if the container has one) so images can be
  // attached; its memory is added to the plan's floor. Off: the tower's
  // bytes are never read and every image call is kUnsupported.
  bool vision = false;
  // Rewind marks per session (Session::SetMark(0 .. rewind_marks-1)): each
  // a copy of the recurrent (KDA) state, counted in the plan's state like
  // the state itself. 0: SetMark is kUnsupported. `waste chat` keeps one to
  // take back a message stopped or failed before its reply; `waste serve`
  // two per slot (the request's restore point and its follow-on prefill's,
  // docs/SERVER.md). `true` still means one.
  int rewind_marks = 0;
  // Prompt-lookup drafting (docs/DRAFTING.md): Generate guesses up to this
  // many next tokens from the text so far and verifies them in one forward
  // pass, keeping those its own sampling agrees with. Faster where the
  // reply repeats its context (an edited file, a quotation); the tokens are
  // those of plain decoding up to float noise (a pass of several tokens
  // rounds like a short prompt). 0 = off; at most kMaxDraftTokens. The plan
  // keeps one more rewind mark per session (the state before a pass).
  // GenParams::draft_tokens can lower it per call.
  int draft_tokens = 0;
};

}  // namespace waste
