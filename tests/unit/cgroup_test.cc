// cgroup memory limits read from fake trees in a temp dir (ENGINE.md §4.3,
// conformance check 3).
#include "platform/cgroup.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

namespace waste::platform {
namespace {

namespace fs = std::filesystem;

class CgroupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = fs::temp_directory_path() /
            ("waste_cgroup_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
             "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(base_);
    fs::create_directories(base_ / "root");
  }
  void TearDown() override { fs::remove_all(base_); }

  std::string root() const { return (base_ / "root").string(); }
  std::string self() const { return (base_ / "self_cgroup").string(); }

  // Writes `text` to root/<rel>, creating directories.
  void Put(const std::string& rel, const std::string& text) {
    fs::path p = base_ / "root" / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  void Self(const std::string& text) { std::ofstream(self()) << text; }
  CgroupLimit Read() { return ReadCgroupMemoryLimit(root(), self()); }

  fs::path base_;
};

TEST_F(CgroupTest, LeafLimit) {
  Self("0::/a/b\n");
  Put("a/b/memory.max", "1000\n");
  CgroupLimit got = Read();
  EXPECT_EQ(got.bytes, 1000u);
  EXPECT_EQ(got.kind, "cgroup v2 memory.max");
  EXPECT_NE(got.source.find("a/b/memory.max"), std::string::npos);
}

TEST_F(CgroupTest, MaxLeafUnderFiniteParent) {
  Self("0::/a/b\n");
  Put("a/b/memory.max", "max\n");
  Put("a/memory.max", "2000\n");
  EXPECT_EQ(Read().bytes, 2000u);
}

TEST_F(CgroupTest, SmallestAncestorWins) {
  Self("0::/a/b\n");
  Put("a/b/memory.max", "5000\n");
  Put("a/memory.max", "3000\n");
  Put("memory.max", "4000\n");
  EXPECT_EQ(Read().bytes, 3000u);
}

TEST_F(CgroupTest, MemoryHighCounts) {
  Self("0::/a/b\n");
  Put("a/b/memory.max", "5000\n");
  Put("a/b/memory.high", "1500\n");
  CgroupLimit got = Read();
  EXPECT_EQ(got.bytes, 1500u);
  EXPECT_EQ(got.kind, "cgroup v2 memory.high");
}

TEST_F(CgroupTest, LimitOnlyAtRoot) {
  Self("0::/a/b\n");
  fs::create_directories(base_ / "root" / "a" / "b");
  Put("memory.max", "7000\n");
  EXPECT_EQ(Read().bytes, 7000u);
}

TEST_F(CgroupTest, UnreadableSelfFileReadsRootOnly) {
  // No self file at all: the leaf cannot be found, the root still counts.
  Put("a/b/memory.max", "1000\n");
  Put("memory.max", "7000\n");
  EXPECT_EQ(Read().bytes, 7000u);
}

TEST_F(CgroupTest, UnreadableSelfFileAndNoRootLimitIsNoLimit) {
  Put("a/b/memory.max", "1000\n");
  EXPECT_EQ(Read().bytes, 0u);
}

TEST_F(CgroupTest, MalformedValuesAreNoLimit) {
  Self("0::/\n");
  for (const char* bad : {"", "\n", "12abc\n", "-5\n", "0x10\n", "1 2\n", "max junk\n",
                          "99999999999999999999999\n", "0\n", " \n", "1e9\n"}) {
    Put("memory.max", bad);
    EXPECT_EQ(Read().bytes, 0u) << "value \"" << bad << "\"";
  }
}

TEST_F(CgroupTest, ValueWithoutNewlineIsFine) {
  Self("0::/\n");
  Put("memory.max", "4096");
  EXPECT_EQ(Read().bytes, 4096u);
}

TEST_F(CgroupTest, DotDotIsRefused) {
  // A path that climbs out of the mount would read base_/etc/memory.max.
  fs::create_directories(base_ / "etc");
  std::ofstream(base_ / "etc" / "memory.max") << "100\n";
  Self("0::/../etc\n");
  EXPECT_EQ(Read().bytes, 0u);
  Put("memory.max", "7000\n");
  EXPECT_EQ(Read().bytes, 7000u);  // the root alone is read
}

TEST_F(CgroupTest, TrailingSlash) {
  Self("0::/a/b/\n");
  Put("a/b/memory.max", "1000\n");
  EXPECT_EQ(Read().bytes, 1000u);
}

TEST_F(CgroupTest, RootWithTrailingSlash) {
  Self("0::/a\n");
  Put("a/memory.max", "1000\n");
  EXPECT_EQ(ReadCgroupMemoryLimit(root() + "/", self()).bytes, 1000u);
}

TEST_F(CgroupTest, V1MemoryController) {
  Self("5:cpu,cpuacct:/x\n4:memory:/docker/abc\n0::/\n");
  Put("memory/docker/abc/memory.limit_in_bytes", "3000\n");
  Put("memory/memory.limit_in_bytes", "9223372036854771712\n");  // v1 "unlimited"
  CgroupLimit got = Read();
  EXPECT_EQ(got.bytes, 3000u);
  EXPECT_EQ(got.kind, "cgroup v1 memory.limit_in_bytes");
}

TEST_F(CgroupTest, V1UnlimitedIsNoLimit) {
  Self("4:memory:/docker/abc\n");
  Put("memory/docker/abc/memory.limit_in_bytes", "9223372036854771712\n");
  EXPECT_EQ(Read().bytes, 0u);
}

TEST_F(CgroupTest, V1PathMissingInMountFallsBackToRoot) {
  // Inside a container the host path does not exist below the mount.
  Self("4:memory:/docker/abc\n");
  Put("memory/memory.limit_in_bytes", "6000\n");
  EXPECT_EQ(Read().bytes, 6000u);
}

TEST_F(CgroupTest, SmallestOfV1AndV2) {
  Self("4:memory:/m\n0::/a\n");
  Put("a/memory.max", "8000\n");
  Put("memory/m/memory.limit_in_bytes", "6000\n");
  EXPECT_EQ(Read().bytes, 6000u);
}

}  // namespace
}  // namespace waste::platform
