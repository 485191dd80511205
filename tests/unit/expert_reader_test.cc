// The thread reader's priorities: demand reads leave the queue before
// speculative ones (newest guess first), those before hotlist warm-up, and
// a promoted request joins the demand queue. One reader thread whose first
// completion is held until the queue is full, so the order is exact.
#include "streaming/expert_reader.h"

#include <gtest/gtest.h>

#include <condition_variable>
#include <fstream>
#include <mutex>
#include <vector>

#include "temp_dir.h"

namespace waste {
namespace {

TEST(ExpertReaderPriorities, DemandBeforeSpeculativeBeforeWarm) {
  testing::TempDir dir;
  const std::string path = dir / "blocks.bin";
  std::vector<uint8_t> bytes(16 * 64);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i / 64);
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
  platform::File file = std::move(platform::File::Open(path).value());

  std::mutex mu;
  std::condition_variable cv;
  bool first_landed = false, go = false;
  std::vector<uint64_t> order;
  IoChoice choice;
  choice.backend = IoBackend::kThreads;
  choice.threads = 1;
  auto reader = ExpertReader::Create(choice, {}, 0, [&](uint64_t tag, Status st) {
    EXPECT_TRUE(st.ok()) << st.message();
    std::unique_lock<std::mutex> lock(mu);
    order.push_back(tag);
    first_landed = true;
    cv.notify_all();
    cv.wait(lock, [&] { return go; });  // the queue fills behind the first read
  });
  ASSERT_TRUE(reader.has_value());
  ASSERT_NE(*reader, nullptr);
  ExpertReader& r = **reader;
  EXPECT_EQ(r.backend(), IoBackend::kThreads);

  std::vector<uint8_t> dst(16 * 64);
  auto submit = [&](uint64_t tag, ReadClass cls) {
    ReadRequest q;
    q.file = &file;
    q.offset = tag * 64;
    q.dst = dst.data() + tag * 64;
    q.bytes = 64;
    q.tag = tag;
    q.cls = cls;
    r.Submit(q);
  };
  submit(0, ReadClass::kDemand);
  {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return first_landed; });
  }
  submit(1, ReadClass::kWarm);
  submit(2, ReadClass::kSpeculative);
  submit(3, ReadClass::kSpeculative);
  submit(4, ReadClass::kDemand);
  submit(5, ReadClass::kWarm);
  submit(6, ReadClass::kSpeculative);
  submit(7, ReadClass::kDemand);
  r.Promote(5);  // someone now waits for warm-up read 5
  {
    std::lock_guard<std::mutex> lock(mu);
    go = true;
  }
  cv.notify_all();
  r.Drain();
  EXPECT_EQ(order, (std::vector<uint64_t>{0, 4, 7, 5, 6, 3, 2, 1}));
  for (size_t i = 0; i < 8 * 64; ++i) ASSERT_EQ(dst[i], bytes[i]) << i;
  ReaderCounters c = r.counters();
  EXPECT_EQ(c.reads, 8u);
  EXPECT_EQ(c.bytes, 8u * 64u);
}

TEST(ExpertReaderPriorities, NoThreadsMeansNoReader) {
  IoChoice choice = ResolveIoChoice(0, 8, "", false);
  EXPECT_EQ(choice.backend, IoBackend::kSync);
  auto reader = ExpertReader::Create(choice, {}, 0, [](uint64_t, Status) {});
  ASSERT_TRUE(reader.has_value());
  EXPECT_EQ(*reader, nullptr);
  EXPECT_EQ(ResolveIoChoice(2, 8, "threads", false).backend, IoBackend::kThreads);
  EXPECT_EQ(ResolveIoChoice(2, 8, "sync", false).backend, IoBackend::kSync);
}

}  // namespace
}  // namespace waste
