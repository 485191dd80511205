// The reference's fixture sets live outside this repository
// (../shared/fixtures, WASTE_FIXTURES_DIR). A checkout without them still
// runs every other test; the ones that read a fixture say SKIP and why
// instead of failing on a missing file.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace waste::testing {

inline bool SharedFixturesPresent() {
  const std::string dir = WASTE_FIXTURES_DIR;
  return std::filesystem::exists(dir + "/warp-tiny/container/manifest.json") &&
         std::filesystem::exists(dir + "/warp-tiny-tok/container/manifest.json");
}

}  // namespace waste::testing

// First statement of a test (or of its fixture's SetUp) that reads the
// shared fixtures.
#define WASTE_SKIP_WITHOUT_FIXTURES()                                                  \
  do {                                                                                 \
    if (!::waste::testing::SharedFixturesPresent()) {                                  \
      GTEST_SKIP() << "the shared fixture sets are not under " << WASTE_FIXTURES_DIR; \
    }                                                                                  \
  } while (0)
