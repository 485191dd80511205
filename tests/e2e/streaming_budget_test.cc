// The budget holds under load (issue #5): generating under a small --budget
// on a container whose experts exceed it keeps the peak resident set under
// the budget plus a stated allowance. The workload runs in a fresh child
// process (this binary re-executed) so earlier tests cannot raise the peak.
// Also drives the CLI: `bench --json` keys, `run --learn`.
#include <gtest/gtest.h>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "e2e/streaming_util.h"
#include "platform/platform.h"
#include "waste/engine.h"
#include "waste/memplan.h"
#include "waste/model.h"

#ifndef WASTE_CLI_BINARY
#define WASTE_CLI_BINARY ""
#endif

namespace waste {
namespace {

// Under a sanitizer the resident set holds its shadow memory (ThreadSanitizer
// maps 5-8x the application's), so the peak says nothing about the budget;
// the workload still runs there (what the sanitizer checks), the RSS
// assertions are skipped saying why.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
constexpr bool kUnderSanitizer = true;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
constexpr bool kUnderSanitizer = true;
#else
constexpr bool kUnderSanitizer = false;
#endif
#else
constexpr bool kUnderSanitizer = false;
#endif

using testing::LinkedCopy;
using testing::StreamingContainer;
using testing::TempDir;
using testing::TestPrompt;

// What the budget does not cover: the test binary's code and data (gtest,
// libstdc++, libc), thread stacks, the allocator's slack and the tokenizer
// tables. Measured: 4 MiB before open, a 173-179 MiB peak at a 179 MiB budget
// (the budget itself is never fully touched); 64 MiB stated.
constexpr uint64_t kAllowance = uint64_t{64} << 20;

// The floor plus `above_floor`: at +30 MiB about 45 slots for 448 records,
// so nearly every access streams; at the floor itself, top_k + 1 slots.
// What the child opens: `sessions` sessions of `ctx`; with `hold` each
// session sets a rewind mark before its work and keeps a snapshot after
// it (what `waste chat` and a `waste serve` slot hold), and the plan keeps
// room for both (Config::rewind_marks, max_snapshots).
Config ChildConfig(uint32_t sessions, uint32_t ctx, bool hold) {
  Config cfg;
  cfg.ctx_tokens = ctx;
  cfg.max_sessions = sessions;
  cfg.max_snapshots = hold ? sessions : 0;
  cfg.rewind_marks = hold;
  return cfg;
}

uint64_t BudgetUnderTest(const Config& cfg, uint64_t above_floor) {
  Result<MemPlan> plan = PlanMemoryForOpen(StreamingContainer(), cfg);
  EXPECT_TRUE(plan.has_value());
  return plan->floor_bytes + above_floor;
}

// Peak RSS of this process. VmHWM belongs to the current address space
// alone (getrusage's ru_maxrss also keeps the pre-exec image's peak).
uint64_t PeakRss() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stoull(line.substr(6)) * 1024;
  }
  return platform::PeakRssBytes();
}

// The child's side: runs only when re-executed by the parent below. With
// two sessions, the second runs a token of its own prompt inside each of
// the first one's token callbacks (both states live, both scratches used).
TEST(StreamingBudget, ChildWorkload) {
  const char* out = std::getenv("WASTE_STREAM_CHILD_OUT");
  if (out == nullptr) GTEST_SKIP() << "runs only as the child of PeakRssStaysUnderTheBudget";
  const uint64_t before = PeakRss();
  const bool hold = std::atoi(std::getenv("WASTE_STREAM_CHILD_HOLD")) != 0;
  Config cfg = ChildConfig(
      static_cast<uint32_t>(std::atoi(std::getenv("WASTE_STREAM_CHILD_SESSIONS"))),
      static_cast<uint32_t>(std::atoi(std::getenv("WASTE_STREAM_CHILD_CTX"))), hold);
  cfg.ram_budget_bytes = std::strtoull(std::getenv("WASTE_STREAM_CHILD_BUDGET"), nullptr, 10);
  auto model = Model::Open(StreamingContainer(), cfg);
  ASSERT_TRUE(model.has_value()) << model.error().ToString();
  Model& m = **model;
  auto first = m.NewSession();
  ASSERT_TRUE(first.has_value()) << first.error().ToString();
  std::unique_ptr<Session> second;
  if (cfg.max_sessions > 1) {
    auto s = m.NewSession();
    ASSERT_TRUE(s.has_value()) << s.error().ToString();
    second = std::move(*s);
  }
  GenParams p;
  p.max_tokens = 16;
  // A full prefill chunk (every per-token buffer used; all its distinct
  // experts hinted through the sliding window), six more tokens, then decode.
  constexpr size_t kChunk = kPrefillChunkTokens;
  std::vector<int> prompt = TestPrompt(m.info().vocab, kChunk + 6);
  std::vector<int> other(prompt.rbegin(), prompt.rend());
  if (second) ASSERT_TRUE(second->Eval(std::span<const int>(other.data(), kChunk)).has_value());
  size_t next = kChunk;
  if (hold) {
    ASSERT_TRUE((*first)->SetMark().ok());
    if (second) ASSERT_TRUE(second->SetMark().ok());
  }
  auto r = (*first)->Generate(prompt, p, [&](const TokenEvent&) {
    if (second && next < other.size()) {
      EXPECT_TRUE(second->Eval(std::span<const int>(&other[next++], 1)).has_value());
    }
    return true;
  });
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  // Snapshots of (nearly) full contexts, held to the end.
  std::vector<SessionSnapshot> held;
  for (Session* session : {first->get(), second.get()}) {
    if (!hold || session == nullptr) continue;
    auto snap = session->Snapshot();
    ASSERT_TRUE(snap.has_value()) << snap.error().ToString();
    held.push_back(*snap);
  }
  Stats s = m.stats();
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  std::ofstream f(out);
  f << before << " " << PeakRss() << " " << static_cast<uint64_t>(ru.ru_maxrss) * 1024 << " "
    << s.experts_missed << " " << m.memory_used().slots << " " << m.memory_used().state_bytes
    << "\n";
}

void CheckPeakRss(uint32_t sessions, uint64_t above_floor = uint64_t{30} << 20,
                  uint32_t ctx = 4096, bool hold = false) {
  TempDir tmp;
  const std::string out = tmp / "child.txt";
  const Config cfg = ChildConfig(sessions, ctx, hold);
  const uint64_t budget = BudgetUnderTest(cfg, above_floor);
  pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::setenv("WASTE_STREAM_CHILD_OUT", out.c_str(), 1);
    ::setenv("WASTE_STREAM_CHILD_BUDGET", std::to_string(budget).c_str(), 1);
    ::setenv("WASTE_STREAM_CHILD_SESSIONS", std::to_string(sessions).c_str(), 1);
    ::setenv("WASTE_STREAM_CHILD_CTX", std::to_string(ctx).c_str(), 1);
    ::setenv("WASTE_STREAM_CHILD_HOLD", hold ? "1" : "0", 1);
    const char* argv[] = {"streaming_budget_test", "--gtest_filter=StreamingBudget.ChildWorkload",
                          nullptr};
    execv("/proc/self/exe", const_cast<char* const*>(argv));
    _exit(127);
  }
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed: " << status;
  std::ifstream f(out);
  uint64_t before = 0, peak = 0, maxrss = 0, misses = 0, slots = 0, state = 0;
  f >> before >> peak >> maxrss >> misses >> slots >> state;
  ASSERT_GT(peak, 0u);
  ::testing::Test::RecordProperty("peak_rss_bytes_" + std::to_string(sessions) + "_sessions", std::to_string(peak));
  std::printf("%u session(s): budget %.1f MiB, child peak RSS %.1f MiB (%.1f MiB before open, "
              "getrusage %.1f MiB), %llu misses through %llu slots\n",
              sessions, budget / 1048576.0, peak / 1048576.0, before / 1048576.0,
              maxrss / 1048576.0, static_cast<unsigned long long>(misses),
              static_cast<unsigned long long>(slots));
  EXPECT_GT(misses, 4 * slots);  // the experts really exceeded the cache
  if (kUnderSanitizer) {
    GTEST_SKIP() << "the workload ran, but peak RSS under a sanitizer includes its shadow memory "
                    "and cannot be compared with the budget";
  }
  EXPECT_LE(peak, budget + kAllowance);
  EXPECT_LE(before, kAllowance);
  // What the process grew by from before open to its peak — the engine's
  // whole part, planned or not (tokenizer tables, thread stacks, reader
  // queues) — stays within the budget. The process's own image (`before`,
  // about 4 MiB here) is not the engine's: counted with it, a run at the
  // floor was seen up to ~100 KB over the budget (issue #19 item 8), the
  // engine's part 4.3-4.6 MiB under it (12 runs).
  EXPECT_LE(peak - before, budget);
  // Every session's state (and mark) is held and counted; the snapshots are
  // the host's, within the room the plan keeps for them.
  Result<MemPlan> plan = PlanMemoryForOpen(StreamingContainer(), cfg);
  ASSERT_TRUE(plan.has_value());
  EXPECT_EQ(state, plan->state_bytes - plan->snapshot_bytes);
}

TEST(StreamingBudget, PeakRssStaysUnderTheBudget) { CheckPeakRss(1); }

// At the floor itself: the smallest cache the engine accepts.
TEST(StreamingBudget, PeakRssStaysUnderTheBudgetAtTheFloor) { CheckPeakRss(1, 0); }

// Two sessions on one model: the budget reserves both sessions' state and
// scratch (the cache gets that much less) and the peak still holds.
TEST(StreamingBudget, PeakRssStaysUnderTheBudgetWithTwoSessions) { CheckPeakRss(2); }

// Two sessions at the floor, each with a rewind mark and a snapshot of its
// (nearly full: 151 of 160 positions) context held: what `waste serve
// --parallel 2` slots hold, and chat's mark. The plan counts a snapshot as
// one session's state, no scratch, and the peak holds.
TEST(StreamingBudget, PeakRssStaysUnderTheBudgetWithMarksAndSnapshots) {
  CheckPeakRss(2, 0, 160, true);
}

// --- the CLI ----------------------------------------------------------------

struct Ran {
  int code = -1;
  std::string out;
};

Ran Shell(const std::string& cmd) {
  Ran r;
  if (std::string(WASTE_CLI_BINARY).empty()) {
    r.out = "the waste CLI is not part of this build";
    return r;
  }
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.out.append(buf, n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

std::string Quote(const std::string& s) { return "'" + s + "'"; }

// The expert cache arena is advised for huge pages unless WASTE_HUGE_PAGES=0
// (Linux kernels with transparent huge pages take the advice).
TEST(StreamingCli, HugePagesFollowTheEnvironment) {
  if (!std::ifstream("/sys/kernel/mm/transparent_hugepage/enabled")) {
    GTEST_SKIP() << "this kernel has no transparent huge pages";
  }
  const std::string cmd = std::string(WASTE_CLI_BINARY) + " bench " + Quote(StreamingContainer()) +
                          " --budget " + std::to_string(BudgetUnderTest(ChildConfig(1, 4096, false), uint64_t{30} << 20)) + "B -n 1 --json 2>/dev/null";
  for (const char* value : {"1", "0"}) {
    Ran r = Shell("WASTE_HUGE_PAGES=" + std::string(value) + " " + cmd);
    ASSERT_EQ(r.code, 0) << r.out;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.out;
    EXPECT_EQ(j["huge_pages"].get<bool>(), std::string(value) == "1") << value;
  }
}

TEST(StreamingCli, BenchJsonIsOneObjectWithTheStreamingKeys) {
  Ran r = Shell(std::string(WASTE_CLI_BINARY) + " bench " + Quote(StreamingContainer()) +
                " --budget " + std::to_string(BudgetUnderTest(ChildConfig(1, 4096, false), uint64_t{30} << 20)) + "B -n 4 --json 2>/dev/null");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  ASSERT_TRUE(j.is_object());
  for (const char* key :
       {"tokens", "tok_per_s", "experts_hit", "experts_missed", "bytes_read", "direct_io",
        "prefill_tok_s", "decode_tok_s", "hit_rate", "read_seconds", "read_gbps", "backend",
        "threads", "peak_rss_bytes", "io_backend", "io_threads", "io_depth", "read_wait_s",
        "cache_policy", "spec_reads", "huge_pages"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["tokens"], 4);
  EXPECT_GT(j["decode_tok_s"].get<double>(), 0);
  EXPECT_GT(j["prefill_tok_s"].get<double>(), 0);
  EXPECT_GT(j["experts_missed"].get<uint64_t>(), 0u);
  EXPECT_GT(j["bytes_read"].get<uint64_t>(), 0u);
  EXPECT_GT(j["read_gbps"].get<double>(), 0);
  double hit = j["hit_rate"].get<double>();
  EXPECT_GE(hit, 0);
  EXPECT_LE(hit, 1);
  EXPECT_GT(j["peak_rss_bytes"].get<uint64_t>(), 0u);
}

TEST(StreamingCli, BenchProfilePrintsPhases) {
  Ran r = Shell("WASTE_PROFILE=1 " + std::string(WASTE_CLI_BINARY) + " bench " +
                Quote(StreamingContainer()) + " -n 2 --json 2>/dev/null");
  ASSERT_EQ(r.code, 0) << r.out;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  ASSERT_TRUE(j.contains("phase_seconds"));
  EXPECT_TRUE(j["phase_seconds"].contains("read_wait"));
  EXPECT_GT(j["phase_seconds"]["experts"].get<double>(), 0);
  // Norms, residual adds and mixes: a phase that was listed but never timed.
  EXPECT_GT(j["phase_seconds"]["norms"].get<double>(), 0);
}

TEST(StreamingCli, RunLearnWritesTheHotlist) {
  LinkedCopy dir(StreamingContainer());
  Ran r = Shell(std::string(WASTE_CLI_BINARY) + " run " + Quote(dir.path()) +
                " -n 3 -q --learn 'hello there' >/dev/null 2>&1; echo $?");
  EXPECT_EQ(r.out, "0\n");
  EXPECT_TRUE(platform::PathExists(dir / "usage.waste"));
  Ran info = Shell(std::string(WASTE_CLI_BINARY) + " info " + Quote(dir.path()) +
                   " --json 2>/dev/null");
  ASSERT_EQ(info.code, 0);
  auto j = nlohmann::json::parse(info.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << info.out;
  EXPECT_GT(j["warm_reads"].get<uint64_t>(), 0u);
  EXPECT_TRUE(j.contains("io_backend"));
}

}  // namespace
}  // namespace waste
