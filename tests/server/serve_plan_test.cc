// `waste serve --plan` prints the memory plan the real start-up reserves:
// the same sessions (one per --parallel slot, each with room for its
// rewind mark: a copy of the KDA state), the same
// vision tower bytes with --vision, the same budget and floor. Checked on a
// generated K3-shaped container with a tower: the plan's JSON against the
// MemoryUsage of an engine opened as `waste serve` opens it (plus the
// server's session pool), and a budget one byte under the printed floor
// fails both the plan and the real start-up.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "cli/subprocess.h"
#include "http_server.h"
#include "json_text.h"
#include "temp_dir.h"
#include "waste/waste.h"

namespace waste::server {
namespace {

test::ProcessResult RunProgram(std::vector<std::string> argv) {
  auto p = test::Subprocess::Spawn(argv, {"WASTE_THREADS=2"});
  EXPECT_TRUE(p);
  if (!p) return {};
  p->CloseStdin();
  EXPECT_TRUE(p->Wait(120));
  return p->result();
}

class ServePlan : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tmp_ = new testing::TempDir();
    dir_ = *tmp_ / "k3v";
    test::ProcessResult g = RunProgram({WASTE_GEN_BINARY, dir_, "--preset", "k3-tiny", "--tokenizer",
                                 "--seed", "7", "--vision", "32,2,48,64,2,4,6,36", "-q"});
    generated_ = g.exit_code == 0;
  }
  static void TearDownTestSuite() { delete tmp_; }
  void SetUp() override {
    if (!generated_) GTEST_SKIP() << "waste-gen could not generate the vision container";
  }

  // `waste serve DIR --plan --json ...`: exit code and the parsed plan.
  static Json Plan(std::vector<std::string> extra, int* exit_code) {
    std::vector<std::string> argv = {WASTE_CLI_BINARY, "serve", dir_, "--plan", "--json",
                                     "--ctx", "512"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    test::ProcessResult r = RunProgram(argv);
    *exit_code = r.exit_code;
    Json j;
    std::string err;
    EXPECT_TRUE(ParseJson(r.out, &j, &err)) << r.out << r.err;
    return j;
  }

  // The engine as `waste serve --ctx 512 --parallel N [--vision] --budget B`
  // opens it, with the server (and its session pool) created on it.
  static Result<std::unique_ptr<Engine>> OpenAsServe(int parallel, bool vision, uint64_t budget) {
    Config cfg;
    cfg.ctx_tokens = 512;
    cfg.ram_budget_bytes = budget;
    cfg.vision = vision;
    cfg.max_sessions = static_cast<uint32_t>(parallel);
    cfg.rewind_marks = RewindMarksFor(ServeOptions{});
    return Engine::Open(dir_, cfg);
  }

  static testing::TempDir* tmp_;
  static std::string dir_;
  static bool generated_;
};

testing::TempDir* ServePlan::tmp_ = nullptr;
std::string ServePlan::dir_;
bool ServePlan::generated_ = false;

// serve takes the other commands' spellings (-c, -t), suggests the closest
// option for a typo and names a missing container as run does.
TEST_F(ServePlan, OptionsSpelledAsElsewhere) {
  test::ProcessResult c = RunProgram({WASTE_CLI_BINARY, "serve", dir_, "--plan", "-c", "1024", "-t", "1"});
  EXPECT_EQ(c.exit_code, 0) << c.out << c.err;
  EXPECT_NE(c.out.find("(ctx 1024)"), std::string::npos) << c.out;
  // The new options parse and check their range.
  test::ProcessResult budget = RunProgram({WASTE_CLI_BINARY, "serve", dir_, "--plan", "--reasoning-budget", "64",
                                           "--earlier-points", "3"});
  EXPECT_EQ(budget.exit_code, 0) << budget.out << budget.err;
  for (const char* bad : {"--reasoning-budget", "--earlier-points"}) {
    test::ProcessResult refused = RunProgram({WASTE_CLI_BINARY, "serve", dir_, "--plan", bad, "-5"});
    EXPECT_EQ(refused.exit_code, 2) << bad << ": " << refused.out << refused.err;
  }
  test::ProcessResult typo = RunProgram({WASTE_CLI_BINARY, "serve", dir_, "--prot", "9"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("unknown option --prot; did you mean --port?"), std::string::npos) << typo.err;
  test::ProcessResult none = RunProgram({WASTE_CLI_BINARY, "serve", dir_ + "-missing"});
  EXPECT_EQ(none.exit_code, 1);
  EXPECT_NE(none.err.find("no such directory: " + dir_ + "-missing"), std::string::npos) << none.err;
}

TEST_F(ServePlan, PlanEqualsWhatStartUpReserves) {
  for (bool vision : {false, true}) {
    for (int parallel : {1, 3}) {
      SCOPED_TRACE("vision " + std::to_string(vision) + ", parallel " + std::to_string(parallel));
      std::vector<std::string> flags = {"--parallel", std::to_string(parallel)};
      if (vision) flags.push_back("--vision");
      int code = -1;
      Json d = Plan(flags, &code);  // the default budget first, for its size
      ASSERT_EQ(code, 0);
      const uint64_t budget = d["recommended_bytes"].get<uint64_t>() + (uint64_t{1} << 20);
      flags.insert(flags.end(), {"--budget", std::to_string(budget) + "B"});
      Json p = Plan(flags, &code);
      ASSERT_EQ(code, 0);
      EXPECT_EQ(p["sessions"], parallel);
      EXPECT_EQ(p["snapshots"], 0);
      EXPECT_EQ(p["marks_included"], true);
      // The request's restore point, the follow-on's, and two earlier points.
      EXPECT_EQ(p["marks_per_session"], 4);
      EXPECT_GT(p["rewind_mark_bytes"].get<uint64_t>(), 0u);
      EXPECT_EQ(p["vision_included"], vision);
      // Every slot's session (its mark included) counted, and the tower once.
      const uint64_t tower = vision ? p["vision_bytes"].get<uint64_t>() : 0;
      const uint64_t state = p["state_bytes"].get<uint64_t>(),
                     scratch = p["scratch_bytes"].get<uint64_t>();
      EXPECT_EQ(state + scratch,
                static_cast<uint64_t>(parallel) * p["session_bytes"].get<uint64_t>() + tower);

      auto engine = OpenAsServe(parallel, vision, budget);
      ASSERT_TRUE(engine) << engine.error().ToString();
      ServeOptions so;
      so.port = 0;
      so.parallel = parallel;
      so.vision = vision;
      so.container_dir = dir_;
      auto server = HttpServer::Create(**engine, so);
      ASSERT_TRUE(server) << server.error().ToString();
      MemoryUsage u = (*engine)->memory_used();
      EXPECT_EQ(u.max_sessions, p["sessions"].get<uint32_t>());
      EXPECT_EQ(u.sessions, static_cast<uint32_t>(parallel));  // the pool's slots are open
      EXPECT_EQ(u.session_reserve_bytes, state + scratch);
      EXPECT_EQ(u.budget_bytes, budget);
      EXPECT_EQ(u.budget_bytes, p["budget_bytes"].get<uint64_t>());
      EXPECT_EQ(u.trunk_bytes, p["trunk_bytes"].get<uint64_t>());
      // The cache gets whole slots of what the plan leaves it, never more.
      EXPECT_LE(u.expert_cache_bytes, p["expert_cache_bytes"].get<uint64_t>());
      EXPECT_GT(u.expert_cache_bytes, 0u);
      // Everything open stays within the plan's reserve and the budget.
      // The slots' marks are set (the pool sets both of every slot at creation).
      EXPECT_EQ(u.state_bytes, state);
      EXPECT_LE(u.state_bytes + u.scratch_bytes, state + scratch);
      if (vision) {
        EXPECT_TRUE((*engine)->has_vision());
        EXPECT_GT(p["vision_bytes"].get<uint64_t>(), 0u);
      }
    }
  }
}

// --draft N: one more rewind mark per slot and the pass's rows (N + 1
// positions) in the plan, said in the text; out of range refused.
TEST_F(ServePlan, DraftAddsAMarkAndThePassRows) {
  int code = -1;
  const Json plain = Plan({}, &code);
  ASSERT_EQ(code, 0);
  const Json draft = Plan({"--draft", "4"}, &code);
  ASSERT_EQ(code, 0);
  EXPECT_EQ(draft["marks_per_session"].get<int>(), plain["marks_per_session"].get<int>() + 1);
  EXPECT_EQ(plain["draft_record_bytes"], 0);
  const uint64_t record = draft["draft_record_bytes"].get<uint64_t>();
  EXPECT_EQ(record, 5 * draft["draft_bytes_per_token"].get<uint64_t>());
  EXPECT_EQ(draft["floor_bytes"].get<uint64_t>() - plain["floor_bytes"].get<uint64_t>(),
            draft["rewind_mark_bytes"].get<uint64_t>() + record);
  test::ProcessResult text =
      RunProgram({WASTE_CLI_BINARY, "serve", dir_, "--plan", "--draft", "4"});
  EXPECT_EQ(text.exit_code, 0) << text.out << text.err;
  EXPECT_NE(text.out.find("for --draft"), std::string::npos) << text.out;
  test::ProcessResult refused =
      RunProgram({WASTE_CLI_BINARY, "serve", dir_, "--plan", "--draft", "17"});
  EXPECT_EQ(refused.exit_code, 2) << refused.out << refused.err;
}

TEST_F(ServePlan, VisionAndParallelRaiseTheFloor) {
  int code = -1;
  Json base = Plan({}, &code);
  ASSERT_EQ(code, 0);
  Json vision = Plan({"--vision"}, &code);
  ASSERT_EQ(code, 0);
  Json wide = Plan({"--parallel", "2"}, &code);
  ASSERT_EQ(code, 0);
  EXPECT_EQ(base["sessions"], 1);
  EXPECT_EQ(base["marks_included"], true);
  EXPECT_EQ(base["vision_included"], false);
  EXPECT_EQ(vision["floor_bytes"].get<uint64_t>(),
            base["floor_bytes"].get<uint64_t>() + vision["vision_bytes"].get<uint64_t>());
  EXPECT_EQ(wide["sessions"], 2);
  EXPECT_EQ(wide["floor_bytes"].get<uint64_t>(),
            base["floor_bytes"].get<uint64_t>() + base["session_bytes"].get<uint64_t>());
  // Without the follow-on prefill a slot keeps one mark less; without
  // earlier points two less; with neither, one in all.
  Json single = Plan({"--no-follow-on"}, &code);
  ASSERT_EQ(code, 0);
  Json latest = Plan({"--earlier-points", "0"}, &code);
  ASSERT_EQ(code, 0);
  Json one = Plan({"--no-follow-on", "--earlier-points", "0"}, &code);
  ASSERT_EQ(code, 0);
  EXPECT_EQ(base["marks_per_session"], 4);
  EXPECT_EQ(single["marks_per_session"], 3);
  EXPECT_EQ(latest["marks_per_session"], 2);
  EXPECT_EQ(one["marks_per_session"], 1);
  EXPECT_EQ(single["floor_bytes"].get<uint64_t>(),
            base["floor_bytes"].get<uint64_t>() - base["rewind_mark_bytes"].get<uint64_t>());
  EXPECT_EQ(latest["floor_bytes"].get<uint64_t>(),
            base["floor_bytes"].get<uint64_t>() - 2 * base["rewind_mark_bytes"].get<uint64_t>());
}

TEST_F(ServePlan, BudgetUnderThePrintedFloorFailsStartUpToo) {
  int code = -1;
  Json d = Plan({"--parallel", "2", "--vision"}, &code);
  ASSERT_EQ(code, 0);
  const uint64_t floor = d["floor_bytes"].get<uint64_t>();
  // At the printed floor both the plan and the real open succeed.
  Json at = Plan({"--parallel", "2", "--vision", "--budget", std::to_string(floor) + "B"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_EQ(at["expert_cache_bytes"].get<int64_t>(), d["min_expert_cache"].get<int64_t>());
  EXPECT_TRUE(OpenAsServe(2, true, floor));
  // One byte under it: the plan says it does not fit, and start-up fails
  // naming the same floor (the message gives exact bytes when rounded
  // sizes would print equal).
  Json under =
      Plan({"--parallel", "2", "--vision", "--budget", std::to_string(floor - 1) + "B"}, &code);
  EXPECT_EQ(code, 1);
  EXPECT_EQ(under["expert_cache_bytes"].get<int64_t>(), -1);
  auto failed = OpenAsServe(2, true, floor - 1);
  ASSERT_FALSE(failed);
  EXPECT_EQ(failed.error().code(), Errc::kRamBudget);
  EXPECT_NE(failed.error().message().find(std::to_string(floor) + " bytes"), std::string::npos)
      << failed.error().message();
  test::ProcessResult r = RunProgram({WASTE_CLI_BINARY, "serve", dir_, "--ctx", "512", "--parallel", "2",
                               "--vision", "--port", "0", "--budget",
                               std::to_string(floor - 1) + "B"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(std::to_string(floor) + " bytes"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace waste::server
