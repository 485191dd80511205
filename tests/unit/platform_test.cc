// The platform shim: positional reads, cache-bypass contract, atomic
// writes, aligned memory, machine facts.
#include "platform/platform.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace waste::platform {
namespace {

namespace fs = std::filesystem;

// A scratch directory under the build tree, which sits on a real disk
// filesystem (so O_DIRECT is usually honoured), unlike /tmp on some hosts.
class PlatformTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(WASTE_BINARY_DIR) / "test_tmp" /
           (std::string("platform_") +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Make(const std::string& name, size_t bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream out(path, std::ios::binary);
    for (size_t i = 0; i < bytes; ++i) out.put(static_cast<char>(i * 7 + 3));
    return path;
  }
  static char Byte(size_t i) { return static_cast<char>(i * 7 + 3); }

  fs::path dir_;
};

TEST_F(PlatformTest, BufferedReadAtAnyOffset) {
  std::string path = Make("f.bin", 10000);
  Result<File> f = File::Open(path);
  ASSERT_TRUE(f.has_value()) << f.error().ToString();
  EXPECT_FALSE(f->bypass());
  EXPECT_EQ(f->size(), 10000u);
  char buf[100];
  ASSERT_TRUE(f->ReadAt(1234, buf, sizeof buf).ok());
  for (size_t i = 0; i < sizeof buf; ++i) ASSERT_EQ(buf[i], Byte(1234 + i));
}

TEST_F(PlatformTest, ShortReadAtEofIsIoError) {
  std::string path = Make("f.bin", 1000);
  Result<File> f = File::Open(path);
  ASSERT_TRUE(f.has_value());
  char buf[100];
  Status s = f->ReadAt(950, buf, sizeof buf);
  EXPECT_EQ(s.code(), Errc::kIo);
  EXPECT_NE(s.message().find("short read"), std::string::npos) << s.message();
  Result<size_t> got = f->TryReadAt(950, buf, sizeof buf);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, 50u);
  Result<size_t> past = f->TryReadAt(5000, buf, sizeof buf);
  ASSERT_TRUE(past.has_value());
  EXPECT_EQ(*past, 0u);
}

TEST_F(PlatformTest, OpenMissingFileIsIoError) {
  EXPECT_EQ(File::Open((dir_ / "nope").string()).error().code(), Errc::kIo);
  EXPECT_EQ(File::OpenBypass((dir_ / "nope").string()).error().code(), Errc::kIo);
}

TEST_F(PlatformTest, BypassProbeMustBeAligned) {
  std::string path = Make("f.bin", 8192);
  EXPECT_EQ(File::OpenBypass(path, 100).error().code(), Errc::kArg);
}

TEST_F(PlatformTest, BypassRefusesUnalignedRequestsBeforeTheOs) {
  std::string path = Make("f.bin", 3 * 4096 + 100);
  Result<File> f = File::OpenBypass(path);
  ASSERT_TRUE(f.has_value()) << f.error().ToString();
  if (!f->bypass()) GTEST_SKIP() << "filesystem under " << dir_ << " refuses cache bypass";
  AlignedPtr<char> buf(static_cast<char*>(AlignedAlloc(kBypassAlignment, 3 * 4096)));
  ASSERT_NE(buf, nullptr);
  EXPECT_EQ(f->ReadAt(1, buf.get(), 4096).code(), Errc::kArg);      // offset
  EXPECT_EQ(f->ReadAt(0, buf.get(), 100).code(), Errc::kArg);       // length
  EXPECT_EQ(f->ReadAt(0, buf.get() + 1, 4096).code(), Errc::kArg);  // buffer
  EXPECT_EQ(f->TryReadAt(4096, buf.get() + 8, 4096).error().code(), Errc::kArg);

  ASSERT_TRUE(f->ReadAt(4096, buf.get(), 2 * 4096).ok());
  for (size_t i = 0; i < 2 * 4096; ++i) ASSERT_EQ(buf.get()[i], Byte(4096 + i));

  // The last block is partial: an aligned request past EOF is a short read,
  // reported as such rather than as the OS's EINVAL for the unaligned tail.
  Status s = f->ReadAt(2 * 4096, buf.get(), 2 * 4096);
  EXPECT_EQ(s.code(), Errc::kIo);
  EXPECT_NE(s.message().find("short read"), std::string::npos) << s.message();
  Result<size_t> got = f->TryReadAt(3 * 4096, buf.get(), 4096);
  ASSERT_TRUE(got.has_value()) << got.error().ToString();
  EXPECT_EQ(*got, 100u);
}

TEST_F(PlatformTest, BypassOpenWorksOnTmpfs) {
  // tmpfs refused O_DIRECT before Linux 6.6 (the open falls back to
  // buffered reads) and accepts it since; either way the file reads.
  fs::path shm = "/dev/shm";
  if (!fs::is_directory(shm)) GTEST_SKIP() << "no /dev/shm on this host";
  fs::path path = shm / ("waste_platform_test_" +
                         std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  {
    std::ofstream out(path, std::ios::binary);
    for (size_t i = 0; i < 8192; ++i) out.put(Byte(i));
  }
  Result<File> f = File::OpenBypass(path.string());
  ASSERT_TRUE(f.has_value()) << f.error().ToString();
  AlignedPtr<char> buf(static_cast<char*>(AlignedAlloc(kBypassAlignment, 4096)));
  ASSERT_TRUE(f->ReadAt(4096, buf.get(), 4096).ok());
  EXPECT_EQ(buf.get()[5], Byte(4096 + 5));
  if (!f->bypass()) {
    char small[10];
    EXPECT_TRUE(f->ReadAt(5, small, sizeof small).ok());
    EXPECT_EQ(small[0], Byte(5));
  }
  fs::remove(path);
}

TEST_F(PlatformTest, MovedFileKeepsHandle) {
  std::string path = Make("f.bin", 100);
  Result<File> f = File::Open(path);
  ASSERT_TRUE(f.has_value());
  File g = std::move(*f);
  EXPECT_FALSE(f->is_open());
  EXPECT_TRUE(g.is_open());
  char c;
  EXPECT_TRUE(g.ReadAt(10, &c, 1).ok());
  EXPECT_EQ(c, Byte(10));
}

TEST_F(PlatformTest, FileFacts) {
  std::string path = Make("f.bin", 777);
  EXPECT_TRUE(PathExists(path));
  EXPECT_FALSE(PathExists(path + ".missing"));
  Result<uint64_t> size = FileSize(path);
  ASSERT_TRUE(size.has_value());
  EXPECT_EQ(*size, 777u);
  EXPECT_EQ(FileSize(path + ".missing").error().code(), Errc::kIo);
  Result<std::string> all = ReadWholeFile(path);
  ASSERT_TRUE(all.has_value());
  ASSERT_EQ(all->size(), 777u);
  EXPECT_EQ((*all)[500], Byte(500));
}

size_t CountEntries(const fs::path& dir) {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  return n;
}

TEST_F(PlatformTest, WriteFileAtomicReplacesAndLeavesNoTemp) {
  std::string path = (dir_ / "state.bin").string();
  std::string first = "first version";
  ASSERT_TRUE(WriteFileAtomic(path, first.data(), first.size()).ok());
  EXPECT_EQ(*ReadWholeFile(path), first);
  std::string second(100000, 'x');
  ASSERT_TRUE(WriteFileAtomic(path, second.data(), second.size()).ok());
  EXPECT_EQ(*ReadWholeFile(path), second);
  EXPECT_EQ(CountEntries(dir_), 1u);
  if (fs::exists("/dev/null")) {  // POSIX permissions exist (not Windows)
    fs::perms p = fs::status(path).permissions();
    EXPECT_EQ(p & (fs::perms::group_all | fs::perms::others_all), fs::perms::none);
  }
}

TEST_F(PlatformTest, WriteFileAtomicFailureRemovesTemp) {
  // Renaming over a non-empty directory fails after the temp was written.
  fs::create_directories(dir_ / "target" / "child");
  std::string data = "payload";
  Status s = WriteFileAtomic((dir_ / "target").string(), data.data(), data.size());
  EXPECT_EQ(s.code(), Errc::kIo);
  EXPECT_EQ(CountEntries(dir_), 1u) << "temp file left behind";
  // And a directory that does not exist fails at create.
  EXPECT_EQ(WriteFileAtomic((dir_ / "no" / "such").string(), data.data(), data.size()).code(),
            Errc::kIo);
}

TEST(Platform, AlignedAllocHonoursAlignment) {
  for (size_t align : {size_t{16}, size_t{64}, size_t{4096}, size_t{16384}}) {
    void* p = AlignedAlloc(align, 12345);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u);
    std::memset(p, 0xab, 12345);
    AlignedFree(p);
  }
  void* zero = AlignedAlloc(64, 0);
  EXPECT_NE(zero, nullptr);
  AlignedFree(zero);
  EXPECT_EQ(AlignedAlloc(48, 100), nullptr);  // not a power of two
}

TEST(Platform, MachineFacts) {
  EXPECT_GE(CpuCount(), 1);
  uint64_t ram = PhysicalRam();
  EXPECT_GT(ram, 0u);
  UsableRam usable = GetUsableRam();
  EXPECT_GT(usable.bytes, 0u);
  EXPECT_LE(usable.bytes, ram);
  EXPECT_FALSE(usable.source.empty());
  EXPECT_GT(PeakRssBytes(), 0u);
  std::vector<int> allowed = AllowedCpus();
  if (!allowed.empty()) EXPECT_EQ(static_cast<int>(allowed.size()), CpuCount());
}

TEST(Platform, BindRefusesWhatItCannotHonour) {
  EXPECT_NE(BindCurrentThread({}).code(), Errc::kOk);
  if (!kHaveAffinity) {
    EXPECT_EQ(BindCurrentThread({0}).code(), Errc::kUnsupported);
    return;
  }
  std::vector<int> allowed = AllowedCpus();
  if (allowed.empty()) GTEST_SKIP() << "affinity cannot be read here";
  int outside = 1023;
  while (outside >= 0 && std::find(allowed.begin(), allowed.end(), outside) != allowed.end()) {
    --outside;
  }
  EXPECT_EQ(BindCurrentThread({outside}).code(), Errc::kArg);
}

// LargeBuffer: what the expert cache and the trunk rely on (issue #18).
TEST(LargeBufferTest, StartsOnA2MiBBoundaryZeroFilledAndWritable) {
  const size_t bytes = (size_t{5} << 20) + 123;  // not a page multiple
  Result<LargeBuffer> b = LargeBuffer::Allocate(bytes, true, "test buffer");
  ASSERT_TRUE(b.has_value()) << b.error().ToString();
  ASSERT_NE(b->data(), nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b->data()) % (size_t{2} << 20), 0u);
  // Rounded to base pages only: the resident set can never exceed the
  // request by a huge page (the memory plan counts `bytes`).
  EXPECT_EQ(b->size(), (bytes + 4095) / 4096 * 4096);
  EXPECT_TRUE(std::all_of(b->data(), b->data() + b->size(), [](uint8_t v) { return v == 0; }));
  std::memset(b->data(), 0xA5, b->size());
  EXPECT_EQ(b->data()[b->size() - 1], 0xA5);
}

TEST(LargeBufferTest, HugePageAdviceFollowsTheRequestAndTheOs) {
  Result<LargeBuffer> off = LargeBuffer::Allocate(size_t{4} << 20, false, "no advice");
  ASSERT_TRUE(off.has_value());
  EXPECT_FALSE(off->huge_pages());
  Result<LargeBuffer> on = LargeBuffer::Allocate(size_t{4} << 20, true, "advised");
  ASSERT_TRUE(on.has_value());
  // Linux kernels built with transparent huge pages take the advice.
  if (std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled")) {
    EXPECT_TRUE(on->huge_pages());
  }
}

TEST(LargeBufferTest, EmptyAndMoved) {
  Result<LargeBuffer> empty = LargeBuffer::Allocate(0, true, "empty");
  ASSERT_TRUE(empty.has_value());
  EXPECT_EQ(empty->data(), nullptr);
  EXPECT_EQ(empty->size(), 0u);
  Result<LargeBuffer> b = LargeBuffer::Allocate(8192, true, "small");
  ASSERT_TRUE(b.has_value());
  uint8_t* p = b->data();
  LargeBuffer moved = std::move(*b);
  EXPECT_EQ(moved.data(), p);
  EXPECT_EQ(b->data(), nullptr);
  moved.data()[8191] = 1;
}

TEST(LargeBufferTest, ImpossibleSizeIsOomNamingTheBuffer) {
  Result<LargeBuffer> b = LargeBuffer::Allocate(SIZE_MAX / 2, true, "the huge arena");
  ASSERT_FALSE(b.has_value());
  EXPECT_EQ(b.error().code(), Errc::kOom);
  EXPECT_NE(b.error().message().find("the huge arena"), std::string::npos);
}

}  // namespace
}  // namespace waste::platform
