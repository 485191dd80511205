// Linux: O_DIRECT with a probe read, sched_{get,set}affinity, sysconf RAM,
// cgroup limits, getrusage. Everything shared with macOS is in posix.cc.
#include <fcntl.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string>
#include <system_error>

#include "platform/cgroup.h"
#include "platform/platform.h"

namespace waste::platform {
namespace {

std::string ErrnoText(int err) { return std::error_code(err, std::generic_category()).message(); }

// Largest mask we ever ask the kernel for; cpu lists stop at 1023 and the
// loop in AllowedCpus grows up to this on machines with more CPUs.
constexpr int kMaxMaskCpus = 1 << 16;

}  // namespace

Result<File> File::OpenBypass(const std::string& path, size_t probe_bytes) {
  if (probe_bytes % kBypassAlignment != 0) {
    return ArgError("bypass probe of " + std::to_string(probe_bytes) +
                    " bytes is not a multiple of 4096");
  }
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_DIRECT);
  } while (fd < 0 && errno == EINTR);
  // EINVAL means this filesystem has no O_DIRECT (tmpfs, some FUSE); any
  // other error (missing file, permissions) is the caller's problem.
  if (fd < 0 && errno != EINVAL) return IoError("open " + path + ": " + ErrnoText(errno));

  bool direct_ok = fd >= 0;
  if (direct_ok && probe_bytes > 0) {
    // Some filesystems accept the flag at open and refuse the first read.
    void* buf = AlignedAlloc(kBypassAlignment, probe_bytes);
    if (buf == nullptr) {
      ::close(fd);
      return OomError("bypass probe buffer for " + path);
    }
    ssize_t got;
    do {
      got = ::pread(fd, buf, probe_bytes, 0);
    } while (got < 0 && errno == EINTR);
    AlignedFree(buf);
    if (got < 0) direct_ok = false;
  }
  if (direct_ok) {
    off_t end = ::lseek(fd, 0, SEEK_END);
    if (end < 0) {
      int err = errno;
      ::close(fd);
      return IoError("size of " + path + ": " + ErrnoText(err));
    }
    File f;
    f.handle_ = fd;
    f.bypass_ = true;
    f.size_ = static_cast<uint64_t>(end);
    f.path_ = path;
    return f;
  }
  if (fd >= 0) ::close(fd);

  Result<File> plain = Open(path);
  if (!plain) return plain;
  // Expert records are read in no particular order; read-ahead would only
  // pull in neighbours nobody asked for.
  ::posix_fadvise(static_cast<int>(plain->native_handle()), 0, 0, POSIX_FADV_RANDOM);
  return plain;
}

std::vector<int> CurrentThreadCpus() {
  for (int ncpus = 1024; ncpus <= kMaxMaskCpus; ncpus *= 4) {
    cpu_set_t* set = CPU_ALLOC(ncpus);
    if (set == nullptr) return {};
    size_t bytes = CPU_ALLOC_SIZE(ncpus);
    CPU_ZERO_S(bytes, set);
    if (::sched_getaffinity(0, bytes, set) != 0) {
      CPU_FREE(set);
      if (errno == EINVAL) continue;  // the kernel's mask is wider: retry larger
      return {};
    }
    std::vector<int> cpus;
    for (int cpu = 0; cpu < ncpus; ++cpu) {
      if (CPU_ISSET_S(cpu, bytes, set)) cpus.push_back(cpu);
    }
    CPU_FREE(set);
    return cpus;
  }
  return {};
}

std::vector<int> AllowedCpus() {
  // Snapshot taken on first use, before a pool has narrowed any thread:
  // later the calling thread's own mask may be a single bound CPU.
  static const std::vector<int> snapshot = CurrentThreadCpus();
  return snapshot;
}

int CpuCount() {
  std::vector<int> allowed = AllowedCpus();
  if (!allowed.empty()) return static_cast<int>(allowed.size());
  long online = ::sysconf(_SC_NPROCESSORS_ONLN);
  return online > 0 ? static_cast<int>(online) : 1;
}

uint64_t PhysicalRam() {
  long pages = ::sysconf(_SC_PHYS_PAGES);
  long page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  return static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
}

UsableRam GetUsableRam() {
  UsableRam usable;
  usable.bytes = PhysicalRam();
  usable.source = "physical";
  CgroupLimit limit = ReadCgroupMemoryLimit("/sys/fs/cgroup", "/proc/self/cgroup");
  if (limit.bytes != 0 && (usable.bytes == 0 || limit.bytes < usable.bytes)) {
    usable.bytes = limit.bytes;
    usable.source = limit.kind;
  }
  return usable;
}

bool AdviseHugePages(void* p, size_t bytes) {
  // Fails with EINVAL where THP is compiled out; "never" mode accepts the
  // advice and ignores it (nothing to detect cheaply, nothing lost).
  return ::madvise(p, bytes, MADV_HUGEPAGE) == 0;
}

uint64_t PeakRssBytes() {
  struct rusage ru;
  if (::getrusage(RUSAGE_SELF, &ru) != 0) return 0;
  return static_cast<uint64_t>(ru.ru_maxrss) * 1024;  // Linux reports KiB
}

double LoadAverage() {
  double load[1];
  return ::getloadavg(load, 1) == 1 ? load[0] : -1.0;
}

Status BindCurrentThread(const std::vector<int>& cpus) {
  if (cpus.empty()) return ArgError("empty cpu set");
  std::vector<int> allowed = AllowedCpus();
  int max_cpu = 0;
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= kMaxMaskCpus)
      return ArgError("CPU " + std::to_string(cpu) + " out of range");
    // sched_setaffinity accepts a mask that merely intersects the allowed
    // set; refuse instead, so a list is either honoured or rejected whole.
    if (!allowed.empty() && !std::binary_search(allowed.begin(), allowed.end(), cpu)) {
      return ArgError("CPU " + std::to_string(cpu) + " is not available to this process");
    }
    if (cpu > max_cpu) max_cpu = cpu;
  }
  cpu_set_t* set = CPU_ALLOC(max_cpu + 1);
  if (set == nullptr) return OomError("cpu mask");
  size_t bytes = CPU_ALLOC_SIZE(max_cpu + 1);
  CPU_ZERO_S(bytes, set);
  for (int cpu : cpus) CPU_SET_S(cpu, bytes, set);
  int rc = ::sched_setaffinity(0, bytes, set);
  int err = errno;
  CPU_FREE(set);
  if (rc != 0) {
    // EINVAL: none of the CPUs is online or allowed to this process.
    if (err == EINVAL) return ArgError("this process may not run on the requested CPUs");
    return Status(Errc::kIo, "sched_setaffinity: " + ErrnoText(err));
  }
  return Status::Ok();
}

}  // namespace waste::platform
