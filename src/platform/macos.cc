// macOS: F_NOCACHE bypass, sysctl RAM, no thread binding (the kernel has
// only affinity *hints*, so a cpu list is refused rather than faked).
// Everything shared with Linux is in posix.cc.
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/sysctl.h>
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>

#include "platform/platform.h"

namespace waste::platform {

Result<File> File::OpenBypass(const std::string& path, size_t probe_bytes) {
  if (probe_bytes % kBypassAlignment != 0) {
    return ArgError("bypass probe of " + std::to_string(probe_bytes) +
                    " bytes is not a multiple of 4096");
  }
  Result<File> f = Open(path);
  if (!f) return f;
  int fd = static_cast<int>(f->native_handle());
  // F_NOCACHE has no alignment contract and never refuses on APFS/HFS+;
  // read-ahead off because records are read in no particular order.
  bool nocache = ::fcntl(fd, F_NOCACHE, 1) == 0;
  ::fcntl(fd, F_RDAHEAD, 0);
  f->bypass_ = nocache;
  return f;
}

std::vector<int> AllowedCpus() {
  std::vector<int> cpus;
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  for (long i = 0; i < n; ++i) cpus.push_back(static_cast<int>(i));
  return cpus;
}

// macOS cannot report a thread's placement.
std::vector<int> CurrentThreadCpus() { return {}; }

int CpuCount() {
  long n = ::sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? static_cast<int>(n) : 1;
}

uint64_t PhysicalRam() {
  uint64_t bytes = 0;
  size_t len = sizeof bytes;
  if (::sysctlbyname("hw.memsize", &bytes, &len, nullptr, 0) != 0) return 0;
  return bytes;
}

UsableRam GetUsableRam() {
  UsableRam usable;
  usable.bytes = PhysicalRam();
  usable.source = "physical";
  return usable;
}

bool AdviseHugePages(void*, size_t) { return false; }  // no THP advice on macOS

uint64_t PeakRssBytes() {
  struct rusage ru;
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<uint64_t>(ru.ru_maxrss);  // macOS reports bytes
}

double LoadAverage() {
  double load[1];
  return ::getloadavg(load, 1) == 1 ? load[0] : -1.0;
}

Status BindCurrentThread(const std::vector<int>& cpus) {
  return UnsupportedError("binding threads to CPUs needs Linux or Windows");
}

}  // namespace waste::platform
