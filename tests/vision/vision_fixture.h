// The warp-tiny-vision fixture set (the reference's K3 vision outputs) and
// the skip that every vision test starts with when it is not there.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace waste {

inline const std::string kSet = std::string(WASTE_FIXTURES_DIR) + "/warp-tiny-vision";

#define SKIP_WITHOUT_VISION_SET()                                                   \
  do {                                                                              \
    if (!std::filesystem::exists(kSet + "/container/vision.json")) {                \
      GTEST_SKIP() << "the vision fixture set is not under " << WASTE_FIXTURES_DIR; \
    }                                                                               \
  } while (0)

}  // namespace waste
