// Issue #19 through the `waste` binary: a prompt file that is a directory
// or a device, a hotlist aimed at the manifest, /save onto a FIFO, a second
// exclusive open, a context whose floor exceeds RAM. Each ends with a clear
// message, no crash, nothing lost. Every test works on its own copy of the
// demo container.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "subprocess.h"
#include "temp_dir.h"

namespace waste::test {
namespace {

namespace fs = std::filesystem;

const std::string kWaste = WASTE_CLI_BINARY;
const std::string kDemo = WASTE_DEMO_CONTAINER;

bool Has(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

ProcessResult Waste(std::vector<std::string> args, std::string_view input = {},
                    double timeout_s = 60) {
  args.insert(args.begin(), kWaste);
  return RunProcess(args, input, timeout_s);
}

class HardeningCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kDemo + "/manifest.json")) GTEST_SKIP() << "no demo container at " << kDemo;
    model_ = tmp_ / "demo";
    fs::copy(kDemo, model_, fs::copy_options::recursive);
  }
  waste::testing::TempDir tmp_;
  std::string model_;
};

TEST_F(HardeningCli, PromptFileThatIsADirectoryOrADeviceIsRefused) {
  for (const std::string& cmd : {"run", "tokenize"}) {
    std::vector<std::string> args = {cmd, model_, "--file", tmp_.path()};
    if (cmd == "run") args.insert(args.end(), {"--raw", "-n", "2"});
    ProcessResult r = Waste(args);
    EXPECT_EQ(r.term_signal, 0) << Describe(r);  // was SIGABRT (uncaught ios_base::failure)
    EXPECT_NE(r.exit_code, 0) << Describe(r);
    EXPECT_TRUE(Has(r.err, ": a directory, not a regular file")) << Describe(r);
  }
  ProcessResult z = Waste({"run", model_, "--raw", "-n", "2", "--file", "/dev/zero"}, {}, 20);
  EXPECT_FALSE(z.timed_out) << Describe(z);  // used to read forever
  EXPECT_NE(z.exit_code, 0) << Describe(z);
  EXPECT_TRUE(Has(z.err, "character device")) << Describe(z);
}

TEST_F(HardeningCli, LearnNeverReplacesTheManifestAndSaysWhy) {
  const std::string manifest = model_ + "/manifest.json";
  const std::string before = Slurp(manifest);
  ProcessResult r = Waste({"run", model_, "--raw", "hello", "-n", "2", "--learn", "--usage",
                           manifest});
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Has(r.err, "warning: --learn")) << Describe(r);
  EXPECT_EQ(Slurp(manifest), before);
  ProcessResult again = Waste({"info", model_});
  EXPECT_EQ(again.exit_code, 0) << Describe(again);
  EXPECT_TRUE(Has(again.out, "finite at open")) << Describe(again);
}

TEST_F(HardeningCli, SaveOntoAFifoIsRefusedAndTheFifoStays) {
  const std::string fifo = tmp_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ProcessResult r = Waste({"chat", model_, "-n", "2"}, "hi\n/save " + fifo + "\n/quit\n");
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Has(r.out, "(save failed: ")) << Describe(r);
  EXPECT_TRUE(Has(r.out, "FIFO")) << Describe(r);
  EXPECT_TRUE(fs::is_fifo(fifo));
}

TEST_F(HardeningCli, SecondExclusiveOpenIsBusy) {
  auto first = Subprocess::Spawn({kWaste, "chat", model_, "--exclusive-open", "-n", "1"});
  ASSERT_NE(first, nullptr);
  // The chat holds the lock once it prints its prompt.
  ASSERT_TRUE(first->ReadUntil([](const std::string& out) { return Has(out, "> "); }, 60))
      << first->result().err;
  ProcessResult second = Waste({"run", model_, "--exclusive-open", "--raw", "x", "-n", "1"});
  EXPECT_NE(second.exit_code, 0) << Describe(second);
  EXPECT_TRUE(Has(second.err, "already open in another process")) << Describe(second);
  ProcessResult shared = Waste({"run", model_, "--raw", "x", "-n", "1"});
  EXPECT_EQ(shared.exit_code, 0) << Describe(shared);  // without the flag: no lock
  first->CloseStdin();
  EXPECT_TRUE(first->Wait(60));
  ProcessResult after = Waste({"run", model_, "--exclusive-open", "--raw", "x", "-n", "1"});
  EXPECT_EQ(after.exit_code, 0) << Describe(after);
}

TEST_F(HardeningCli, ContextWhoseFloorExceedsRamNamesTheFloor) {
  ProcessResult plan = Waste({"plan", model_, "--ctx", "2147483647"});
  EXPECT_EQ(plan.term_signal, 0) << Describe(plan);
  EXPECT_TRUE(Has(plan.err + plan.out, "floor")) << Describe(plan);
  EXPECT_FALSE(Has(plan.out, "default budget")) << Describe(plan);
  ProcessResult run = Waste({"run", model_, "--raw", "x", "-n", "1", "--ctx", "2000000000"});
  EXPECT_NE(run.exit_code, 0) << Describe(run);
  EXPECT_TRUE(Has(run.err, "floor")) << Describe(run);
}

}  // namespace
}  // namespace waste::test
