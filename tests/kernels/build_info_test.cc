// waste::BuildInfo() / BackendName(): the exact shape hosts and `waste
// --version` print, and that the backend named is the one in use.
#include <regex>
#include <string>

#include <gtest/gtest.h>

#include "kernels/kernel_table.h"
#include "waste/waste.h"

namespace waste {
namespace {

TEST(BuildInfo, HasTheDocumentedShape) {
  const std::string info = BuildInfo();
  const std::regex shape(
      R"(WASTE \d+\.\d+\.\d+ \(container v0, backend (CPU|NEON|AVX2|AVX-512)(\+[A-Za-z0-9]+)*, )"
      R"(crc32 zlib, (x86_64|arm64|generic)\))");
  EXPECT_TRUE(std::regex_match(info, shape)) << info;
  EXPECT_EQ(info.rfind("WASTE " WASTE_VERSION_STRING " (", 0), 0u) << info;
}

TEST(BuildInfo, NamesTheActiveBackend) {
  EXPECT_EQ(BackendName(), kernels::ActiveKernels().name);
  EXPECT_NE(BuildInfo().find("backend " + BackendName() + ","), std::string::npos);
#if defined(__x86_64__)
  EXPECT_NE(BuildInfo().find(", x86_64)"), std::string::npos);
#elif defined(__aarch64__)
  EXPECT_NE(BuildInfo().find(", arm64)"), std::string::npos);
#endif
}

}  // namespace
}  // namespace waste
