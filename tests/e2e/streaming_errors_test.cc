// Records are validated on arrival (FORMAT.md §8.2, ENGINE.md §5.6) in
// every read mode: a damaged header, a flipped payload bit under --verify,
// reported as "expert E of layer L: <why>" with WASTE_E_IO — never a hang,
// never garbage logits — whether the read was synchronous, a thread
// reader's, io_uring's, a hinted read-ahead or a lookahead guess.
#include <gtest/gtest.h>

#include <fstream>
#include <iterator>

#include "e2e/streaming_util.h"
#include "generator.h"
#include "waste/engine.h"
#include "waste/memplan.h"

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
  Status Drive(std::string* detail) {
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
    return r.has_value() ? Status::Ok() : r.error();
  }
  TempDir dir_;
  uint64_t record_ = 0;
  Config cfg_;
};

TEST_P(StreamingErrors, DamagedHeaderIsReportedWithTheRecord) {
  DamageEveryRecord(2, 0, 0xFF);  // the magic
  std::string detail;
  Status st = Drive(&detail);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Errc::kIo) << st.ToString();
  EXPECT_NE(st.message().find("of layer 2: record header is not what the bank index describes"),
            std::string::npos)
      << st.message();
  EXPECT_EQ(detail.rfind("expert ", 0), 0u) << detail;
}

TEST_P(StreamingErrors, FlippedPayloadBitNeedsVerify) {
  DamageEveryRecord(1, 100, 0x01);  // inside the gate indices, covered by the crc
  std::string detail;
  EXPECT_TRUE(Drive(&detail).ok()) << "without --verify the payload is trusted";
  cfg_.verify_records = true;
  Status st = Drive(&detail);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Errc::kIo);
  EXPECT_NE(st.message().find("of layer 1: checksum mismatch"), std::string::npos)
      << st.message();
}

INSTANTIATE_TEST_SUITE_P(Backends, StreamingErrors, ::testing::Values("sync", "threads", "uring"));

}  // namespace
}  // namespace waste
