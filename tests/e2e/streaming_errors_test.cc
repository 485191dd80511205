// Records are validated on arrival (FORMAT.md §8.2, ENGINE.md §5.6) in
// every read mode: a damaged header, a flipped payload bit under --verify,
// reported as "expert E of layer L: <why>" with WASTE_E_IO — never a hang,
// never garbage logits — whether the read was synchronous, a thread
// reader's, io_uring's, a hinted read-ahead or a lookahead guess. Which
// record failed is data as well as words: Status::failed_expert(),
// Engine::failed_expert(), waste_failed_expert() in C, and the CLI's
// damaged-container advice keys on it.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <optional>

#include "e2e/streaming_util.h"
#include "generator.h"
#include "waste/engine.h"
#include "waste.h"
#include "waste/memplan.h"

#ifdef WASTE_CLI_BINARY
#include "cli/subprocess.h"
#endif

namespace waste {
namespace {

using testing::ScopedEnv;
using testing::TempDir;
using testing::TestPrompt;

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

class StreamingErrors : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    gen::GenOptions o;
    o.out_dir = dir_.path();
    o.preset = "tiny";
    ASSERT_TRUE(gen::Generate(o).has_value());
    Result<MemPlan> plan = PlanMemory(dir_.path(), 4096);
    ASSERT_TRUE(plan.has_value());
    record_ = plan->record_bytes;
    cfg_.ram_budget_bytes = plan->floor_bytes;
    cfg_.lookahead = 6;
    cfg_.io_threads = std::string(GetParam()) == "sync" ? 0 : 2;
  }
  // XORs byte `offset` of every record of layer `layer`'s bank.
  void DamageEveryRecord(int layer, size_t offset, uint8_t mask) {
    std::string path = dir_ / ("experts-L" + std::to_string(layer) + ".bin");
    std::string bytes = ReadFile(path);
    for (size_t r = 0; r + record_ <= bytes.size(); r += record_) {
      bytes[r + offset] = static_cast<char>(static_cast<uint8_t>(bytes[r + offset]) ^ mask);
    }
    WriteFile(path, bytes);
  }
  // Prefill, then decode steps: the error must surface on one of them.
  // `failed` gets Engine::failed_expert() after the last call.
  Status Drive(std::string* detail, std::optional<ExpertFailureInfo>* failed = nullptr) {
    ScopedEnv io("WASTE_IO", GetParam());
    auto e = Engine::Open(dir_.path(), cfg_);
    if (!e) return e.error();
    std::vector<int> prompt = TestPrompt((*e)->info().vocab, 3);
    auto r = (*e)->Eval(prompt);
    for (int step = 0; r.has_value() && step < 6; ++step) {
      int t = step % (*e)->info().vocab;
      r = (*e)->Eval(std::span<const int>(&t, 1));
    }
    *detail = (*e)->error_detail();
    if (failed != nullptr) *failed = (*e)->failed_expert();
    return r.has_value() ? Status::Ok() : r.error();
  }
  TempDir dir_;
  uint64_t record_ = 0;
  Config cfg_;
};

// The expert number a failure message names ("expert E of layer L: ...").
std::optional<ExpertFailureInfo> NamedInMessage(const std::string& message) {
  ExpertFailureInfo f;
  if (std::sscanf(message.c_str(), "expert %d of layer %d:", &f.expert, &f.layer) != 2) {
    return std::nullopt;
  }
  return f;
}

TEST_P(StreamingErrors, DamagedHeaderIsReportedWithTheRecord) {
  DamageEveryRecord(2, 0, 0xFF);  // the magic
  std::string detail;
  std::optional<ExpertFailureInfo> failed;
  Status st = Drive(&detail, &failed);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Errc::kIo) << st.ToString();
  EXPECT_NE(st.message().find("of layer 2: record header is not what the bank index describes"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(detail.rfind("expert ", 0), 0u) << detail;
  // The record as data: the Status and the engine agree with the words.
  ASSERT_TRUE(st.failed_expert().has_value());
  EXPECT_EQ(st.failed_expert()->layer, 2);
  EXPECT_EQ(st.failed_expert(), NamedInMessage(st.message())) << st.message();
  EXPECT_EQ(failed, st.failed_expert());
}

TEST_P(StreamingErrors, FlippedPayloadBitNeedsVerify) {
  DamageEveryRecord(1, 100, 0x01);  // inside the gate indices, covered by the crc
  std::string detail;
  std::optional<ExpertFailureInfo> failed;
  EXPECT_TRUE(Drive(&detail, &failed).ok()) << "without --verify the payload is trusted";
  EXPECT_FALSE(failed.has_value());
  cfg_.verify_records = true;
  Status st = Drive(&detail, &failed);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Errc::kIo);
  EXPECT_NE(st.message().find("of layer 1: checksum mismatch"), std::string::npos)
      << st.message();
  ASSERT_TRUE(failed.has_value());
  EXPECT_EQ(failed->layer, 1);
  EXPECT_EQ(failed, NamedInMessage(st.message())) << st.message();
}

// One damaged record at a time: whenever a run fails, it names exactly that
// record; once the record is whole again, the next call succeeds and leaves
// no failed expert behind; a failure of another kind names none.
TEST_P(StreamingErrors, FailedExpertIsTheDamagedRecord) {
  const std::string path = dir_ / "experts-L2.bin";
  const std::string good = ReadFile(path);
  int failures = 0;
  for (int expert = 0; expert < 8; ++expert) {
    SCOPED_TRACE("damaged expert " + std::to_string(expert));
    std::string bad = good;
    bad[expert * record_] = static_cast<char>(static_cast<uint8_t>(bad[expert * record_]) ^ 0xFF);
    WriteFile(path, bad);
    ScopedEnv io("WASTE_IO", GetParam());
    auto e = Engine::Open(dir_.path(), cfg_);
    ASSERT_TRUE(e) << e.error().ToString();
    std::vector<int> prompt = TestPrompt((*e)->info().vocab, 8);
    auto r = (*e)->Eval(prompt);
    if (r.has_value()) {
      EXPECT_FALSE((*e)->failed_expert().has_value());  // not routed to it
      continue;
    }
    ++failures;
    ASSERT_TRUE(r.error().failed_expert().has_value()) << r.error().ToString();
    EXPECT_EQ(*r.error().failed_expert(), (ExpertFailureInfo{2, expert}));
    EXPECT_EQ((*e)->failed_expert(), r.error().failed_expert());
    // Whole again: the record is read anew, and nothing failed.
    WriteFile(path, good);
    r = (*e)->Eval(prompt);
    ASSERT_TRUE(r.has_value()) << r.error().ToString();
    EXPECT_FALSE((*e)->failed_expert().has_value());
    EXPECT_TRUE((*e)->error_detail().empty());
    // A failure of another kind is not an expert's.
    WriteFile(path, bad);
    int bad_id = -1;
    EXPECT_FALSE((*e)->Eval(std::span<const int>(&bad_id, 1)).has_value());
    EXPECT_FALSE((*e)->failed_expert().has_value());
  }
  WriteFile(path, good);
  EXPECT_GT(failures, 0) << "no damaged record was ever routed to";
}

INSTANTIATE_TEST_SUITE_P(Backends, StreamingErrors, ::testing::Values("sync", "threads", "uring"));

// The C API reports the same record through waste_failed_expert, and the
// CLI still prints the damaged-container advice (its text unchanged).
TEST(StreamingErrorsOutside, CApiAndCliNameTheRecord) {
  TempDir dir;
  gen::GenOptions o;
  o.out_dir = dir.path();
  o.preset = "tiny";
  ASSERT_TRUE(gen::Generate(o).has_value());
  Result<MemPlan> plan = PlanMemory(dir.path(), 4096);
  ASSERT_TRUE(plan.has_value());
  const std::string path = dir / "experts-L2.bin";
  std::string bytes = ReadFile(path);
  for (size_t r = 0; r + plan->record_bytes <= bytes.size(); r += plan->record_bytes) {
    bytes[r] = static_cast<char>(static_cast<uint8_t>(bytes[r]) ^ 0xFF);
  }

  waste_cfg cfg;
  waste_cfg_init(&cfg);
  waste_ctx* ctx = nullptr;
  ASSERT_EQ(waste_open(dir.path().c_str(), &cfg, &ctx), WASTE_OK);
  int32_t layer = -1, expert = -1;
  const int32_t ids[3] = {1, 2, 3};
  ASSERT_EQ(waste_eval(ctx, ids, 3, nullptr, nullptr), WASTE_OK);
  EXPECT_EQ(waste_failed_expert(ctx, &layer, &expert), 0);
  EXPECT_EQ(layer, -1);  // nothing stored
  waste_close(ctx);
  WriteFile(path, bytes);  // damaged before the open: nothing of it is cached
  ctx = nullptr;
  ASSERT_EQ(waste_open(dir.path().c_str(), &cfg, &ctx), WASTE_OK);
  ASSERT_EQ(waste_eval(ctx, ids, 3, nullptr, nullptr), WASTE_E_IO);
  ASSERT_EQ(waste_failed_expert(ctx, &layer, &expert), 1);
  EXPECT_EQ(layer, 2);
  const std::string detail = waste_error_detail(ctx);
  EXPECT_EQ(NamedInMessage(detail), (ExpertFailureInfo{layer, expert})) << detail;
  EXPECT_EQ(waste_failed_expert(ctx, nullptr, nullptr), 1);
  waste_state_reset(ctx);
  EXPECT_EQ(waste_failed_expert(ctx, nullptr, nullptr), 0);
  EXPECT_EQ(waste_failed_expert(nullptr, &layer, &expert), 0);
  waste_close(ctx);

#ifdef WASTE_CLI_BINARY
  test::ProcessResult p =
      test::RunProcess({WASTE_CLI_BINARY, "eval", dir.path(), "--ids", "1 2 3"});
  EXPECT_EQ(p.exit_code, 1) << p.err;
  EXPECT_NE(p.err.find("eval: I/O error\n  expert "), std::string::npos) << p.err;
  EXPECT_NE(p.err.find(" of layer 2: record header is not what the bank index describes: "),
            std::string::npos)
      << p.err;
  EXPECT_NE(p.err.find("\n  the container is damaged or truncated: re-download or re-convert it "
                       "(`--verify` checks the crc32 of every record as it is read)\n"),
            std::string::npos)
      << p.err;
#endif
}

}  // namespace
}  // namespace waste
