// Bisection-level conformance: the residual stream after every layer and
// every MoE routing decision, prompt fed one token at a time, against the
// reference's dumps (extra/hidden_per_layer_seq.f32, extra/route_seq.txt).
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "container/container.h"
#include "e2e/fixture_model.h"
#include "streaming/expert_cache.h"
#include "model/forward.h"
#include "kernels/kernel_table.h"
#include "model/layer_weights.h"
#include "runtime/ops.h"
#include "model/session_state.h"

namespace waste {
namespace {

using testing::FixtureDir;

struct Model : testing::FixtureModel {
  std::unique_ptr<SessionState> state;
  std::unique_ptr<Forward> fwd;
};

Model OpenModel(const std::string& set) {
  Model m;
  static_cast<testing::FixtureModel&>(m) = testing::OpenFixtureModel(set, 64);
  if (!m.c) return m;
  m.state = std::make_unique<SessionState>(m.c->config(), 256);
  m.fwd = std::make_unique<Forward>(*m.c, m.w, *m.state, *m.cache, 256);
  return m;
}

class LayersTest : public ::testing::TestWithParam<const char*> {};

TEST_P(LayersTest, HiddenAndRoutesMatchReference) {
  std::string set = GetParam();
  if (!testing::FixturesPresent(set)) GTEST_SKIP() << "fixture set missing";
  Model m = OpenModel(set);
  ASSERT_TRUE(m.fwd);
  const ModelConfig& cfg = m.c->config();
  auto prompt = testing::Ids(testing::ReadJson(FixtureDir(set) + "/prompt_ids.json"));
  auto want = testing::ReadF32(FixtureDir(set) + "/extra/hidden_per_layer_seq.f32");
  std::vector<float> hidden;
  m.fwd->hidden_trace = &hidden;
  std::ostringstream routes;
  m.fwd->on_route = [&](int pos, int layer, const Routing& r) {
    routes << pos << ' ' << layer;
    for (int id : r.ids) routes << ' ' << id;
    routes << '\n';
  };
  Ops ops(kernels::BuildKernelTable(kernels::Isa::kBaseline), nullptr);
  for (int tok : prompt) ASSERT_TRUE(m.fwd->Run(ops, std::span<const int>(&tok, 1), true).ok());
  ASSERT_EQ(hidden.size(), want.size());
  const size_t h = static_cast<size_t>(cfg.hidden);
  for (size_t t = 0; t < prompt.size(); ++t) {
    for (int l = 0; l < cfg.n_layers; ++l) {
      size_t off = (t * static_cast<size_t>(cfg.n_layers) + static_cast<size_t>(l)) * h;
      std::span<const float> a(hidden.data() + off, h), b(want.data() + off, h);
      ASSERT_LE(testing::MaxAbsDiff(a, b), 1e-4f * (1.0f + testing::MaxAbs(b)))
          << "position " << t << " layer " << l;
    }
  }
  // Routes: ids in selection order must be identical.
  std::ifstream f(FixtureDir(set) + "/extra/route_seq.txt");
  std::istringstream got(routes.str());
  std::string want_line, got_line;
  int lines = 0;
  while (std::getline(f, want_line)) {
    ASSERT_TRUE(std::getline(got, got_line));
    std::istringstream ws(want_line);
    std::ostringstream prefix;
    int pos, layer;
    ws >> pos >> layer;
    prefix << pos << ' ' << layer;
    for (int j = 0; j < cfg.moe.top_k; ++j) {
      int id;
      ws >> id;
      prefix << ' ' << id;
    }
    EXPECT_EQ(got_line, prefix.str());
    ++lines;
  }
  EXPECT_GT(lines, 0);
}

INSTANTIATE_TEST_SUITE_P(Sets, LayersTest, ::testing::Values("warp-tiny", "warp-tiny-tok"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) if (c == '-') c = '_';
                           return s;
                         });

}  // namespace
}  // namespace waste
