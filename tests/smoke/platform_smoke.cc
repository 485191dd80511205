// A main() program over the base layer (platform shim, cpu lists, thread
// pool) for targets where GoogleTest is not available: the MinGW cross
// build runs it under wine (scripts/mingw-check.sh). Exit 0 = all good.
#include <atomic>
#include <cstdio>
#include <string>
#include <vector>

#include "platform/cpu_list.h"
#include "platform/platform.h"
#include "runtime/thread_pool.h"

namespace {

int failures = 0;

void Check(bool ok, const char* what) {
  std::printf("%s  %s\n", ok ? "ok  " : "FAIL", what);
  if (!ok) ++failures;
}

}  // namespace

int main() {
  using namespace waste;
  using namespace waste::platform;

  Check(ParseCpuList(" 0 - 2 , 4 ").has_value(), "cpu list accepted");
  Check(!ParseCpuList("0-").has_value(), "cpu list refused");

  std::printf("cpus %d, physical RAM %llu, usable %llu (%s), allowed %zu\n", CpuCount(),
              static_cast<unsigned long long>(PhysicalRam()),
              static_cast<unsigned long long>(GetUsableRam().bytes), GetUsableRam().source.c_str(),
              AllowedCpus().size());
  Check(CpuCount() >= 1 && PhysicalRam() > 0, "machine facts");

  const std::string path = "waste_smoke.bin";
  std::vector<char> data(3 * 4096 + 100);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 3);
  Check(WriteFileAtomic(path, data.data(), data.size()).ok(), "atomic write");
  Result<File> f = File::OpenBypass(path);
  Check(f.has_value(), "bypass open");
  if (f.has_value()) {
    std::printf("bypass: %s, size %llu\n", f->bypass() ? "yes" : "no (fallback)",
                static_cast<unsigned long long>(f->size()));
    AlignedPtr<char> buf(static_cast<char*>(AlignedAlloc(kBypassAlignment, 8192)));
    Check(f->ReadAt(4096, buf.get(), 4096).ok() && buf.get()[1] == data[4097], "aligned read");
    if (f->bypass()) Check(f->ReadAt(1, buf.get(), 4096).code() == Errc::kArg, "unaligned refused");
    Status s = f->ReadAt(2 * 4096, buf.get(), 8192);
    Check(s.code() == Errc::kIo, "short read at EOF");
  }
  Result<std::string> whole = ReadWholeFile(path);
  Check(whole.has_value() && whole->size() == data.size(), "read whole file");
  std::remove(path.c_str());

  {
    Result<LargeBuffer> big = LargeBuffer::Allocate((size_t{3} << 20) + 5, true, "smoke buffer");
    bool ok = big.has_value() && big->data() != nullptr && big->size() >= (size_t{3} << 20) + 5 &&
              big->data()[big->size() - 1] == 0;
    if (ok) {
      big->data()[0] = 7;
      big->data()[big->size() - 1] = 9;
      ok = big->data()[0] == 7 && big->data()[big->size() - 1] == 9;
    }
    Check(ok, "large buffer");
  }

  Result<std::unique_ptr<ThreadPool>> pool = ThreadPool::Create(4);
  Check(pool.has_value(), "pool");
  if (pool.has_value()) {
    std::vector<std::atomic<int>> seen(1000);
    for (int rep = 0; rep < 100; ++rep) {
      (*pool)->ParallelFor(seen.size(), 8, [&](size_t b, size_t e) {
        for (size_t i = b; i < e; ++i) seen[i].fetch_add(1);
      });
    }
    bool all = true;
    for (auto& s : seen) all = all && s.load() == 100;
    Check(all, "every index once per job");
  }
  std::vector<int> allowed = AllowedCpus();
  if (kHaveAffinity && !allowed.empty()) {
    Check(BindCurrentThread({allowed.back()}).ok(), "bind to one allowed CPU");
    Check(CurrentThreadCpus() == std::vector<int>{allowed.back()}, "thread mask reads back");
  }
  std::printf("%s\n", failures == 0 ? "all passed" : "FAILURES");
  return failures == 0 ? 0 : 1;
}
