// A fixture set's container opened for tests that drive layers directly:
// weights resolved and a synchronous expert cache (failures are gtest
// failures; `c` is null when the container did not open).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "container/container.h"
#include "e2e/fixture_util.h"
#include "model/layer_weights.h"
#include "streaming/expert_cache.h"

namespace waste::testing {

struct FixtureModel {
  std::unique_ptr<Container> c;
  ModelWeights w;
  std::unique_ptr<ExpertCache> cache;
};

inline FixtureModel OpenFixtureModel(const std::string& set, uint64_t slots) {
  FixtureModel m;
  auto c = Container::Open(FixtureDir(set) + "/container");
  EXPECT_TRUE(c.has_value()) << (c ? "" : c.error().ToString());
  if (!c) return m;
  m.c = std::move(*c);
  auto w = ResolveWeights(*m.c);
  EXPECT_TRUE(w.has_value());
  if (w) m.w = std::move(*w);
  m.cache = std::move(ExpertCache::Create(*m.c, slots, CachePolicy::kLfru, true).value());
  return m;
}

}  // namespace waste::testing
