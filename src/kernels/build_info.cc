// Build facts for `waste --version` and hosts: version, container format,
// the kernel backend this process actually uses, crc32 implementation and
// architecture (include/waste/waste.h).
#include <string>

#include "kernels/kernel_table.h"
#include "waste/waste.h"

namespace waste {
namespace {

#if defined(__x86_64__) || defined(_M_X64)
constexpr const char kArch[] = "x86_64";
#elif defined(__aarch64__) || defined(_M_ARM64)
constexpr const char kArch[] = "arm64";
#else
constexpr const char kArch[] = "generic";
#endif

// Record checksums use zlib's crc32 (FORMAT.md §7); no other implementation
// is compiled in, so the name is a build fact, not a run-time choice.
constexpr const char kCrc32Impl[] = "zlib";

}  // namespace

std::string BackendName() noexcept {
  try {
    return kernels::ActiveKernels().name;
  } catch (...) {
    return {};
  }
}

std::string BuildInfo() noexcept try {
  std::string s = "WASTE " WASTE_VERSION_STRING " (container v";
  s += std::to_string(WASTE_FORMAT_VERSION);
  s += ", backend ";
  s += BackendName();
  s += ", crc32 ";
  s += kCrc32Impl;
  s += ", ";
  s += kArch;
  s += ")";
  return s;
} catch (...) {
  return {};
}

}  // namespace waste
