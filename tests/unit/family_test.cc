// Model families (model/families.cc): every family's waste-gen preset reads
// back as that family, and config -> manifest -> config is the identity
// (ModelConfigToJson is ParseModelConfig's inverse). What a family cannot
// run is refused at open with kUnsupported, never run differently.
#include <gtest/gtest.h>

#include <string>

#include "container/container.h"
#include "container/tensor_list.h"
#include "model/config_parse.h"
#include "model/families.h"
#include "presets.h"

namespace waste {
namespace {

using nlohmann::ordered_json;

ordered_json ManifestHead(const ordered_json& config, const std::string& prefix) {
  return ordered_json{{"format_version", 0}, {"tensor_prefix", prefix}, {"config", config}};
}

Result<ModelConfig> ReadConfig(const ordered_json& config, const std::string& prefix = "") {
  WASTE_ASSIGN_OR_RETURN(Manifest m,
                         ParseManifestConfig(ManifestHead(config, prefix).dump(), "test"));
  return m.config;
}

// config -> manifest -> config.
void ExpectRoundTrip(const ModelConfig& a) {
  Result<ModelConfig> b = ReadConfig(ModelConfigToJson(a), a.tensor_prefix);
  ASSERT_TRUE(b.has_value()) << b.error().ToString();
  EXPECT_TRUE(a == *b) << "config differs after a round trip through\n"
                       << ModelConfigToJson(a).dump(2);
}

TEST(Family, EveryFamilyRoundTripsThroughItsPreset) {
  int families = 0;
  ForEachFamily([&](const Family& f) {
    ++families;
    SCOPED_TRACE(std::string(f.key.empty() ? "(fallback)" : f.key));
    ordered_json config;
    std::string prefix;
    if (f.generator_preset.empty()) {
      // The fallback: a known shape under an architecture no family claims.
      Result<gen::Preset> p = gen::MakePreset("tiny");
      ASSERT_TRUE(p.has_value());
      config = p->config;
      config["architectures"] = ordered_json::array({"SomeOtherForCausalLM"});
    } else {
      Result<gen::Preset> p = gen::MakePreset(f.generator_preset);
      ASSERT_TRUE(p.has_value()) << "family names waste-gen preset \"" << f.generator_preset
                                 << "\", which does not exist";
      config = p->config;
      prefix = p->tensor_prefix;
    }
    Result<ModelConfig> a = ReadConfig(config, prefix);
    ASSERT_TRUE(a.has_value()) << a.error().ToString();
    EXPECT_EQ(&FamilyForArchitecture(a->architecture), &f);
    EXPECT_EQ(a->arch, f.key.empty() ? "SomeOtherForCausalLM" : std::string(f.key));
    ExpectRoundTrip(*a);
  });
  EXPECT_GE(families, 4);
}

// One tensor list: every spec carries the slot weight resolution fills.
TEST(Family, EveryTensorOfEveryPresetHasABinding) {
  for (const std::string& name : gen::PresetNames()) {
    Result<gen::Preset> p = gen::MakePreset(name);
    ASSERT_TRUE(p.has_value());
    Result<ModelConfig> c = ReadConfig(p->config, p->tensor_prefix);
    ASSERT_TRUE(c.has_value()) << name << ": " << c.error().ToString();
    for (const TensorSpec& spec : ModelTensors(*c)) {
      EXPECT_NE(spec.bind, nullptr) << name << ": " << spec.name;
      EXPECT_LT(spec.layer, c->n_layers) << spec.name;
    }
  }
}

TEST(Family, KnobsFollowTheConfig) {
  Result<gen::Preset> p = gen::MakePreset("k3-tiny");
  ASSERT_TRUE(p.has_value());
  Result<ModelConfig> c = ReadConfig(p->config, p->tensor_prefix);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->mla.query, QueryProjection::kLowRank);
  EXPECT_EQ(c->kda.decay, KdaDecay::kBounded);
  EXPECT_EQ(c->kda.gate_rank, KdaGateRank::kFull);
  EXPECT_EQ(c->moe.input, ExpertInput::kLatent);
  EXPECT_EQ(c->attn_res.kind, ResidualKind::kAttnRes);

  Result<gen::Preset> t = gen::MakePreset("tiny");
  ASSERT_TRUE(t.has_value());
  Result<ModelConfig> d = ReadConfig(t->config);
  ASSERT_TRUE(d.has_value()) << d.error().ToString();
  EXPECT_EQ(d->mla.query, QueryProjection::kFull);
  EXPECT_EQ(d->kda.decay, KdaDecay::kSoftplus);
  EXPECT_EQ(d->kda.gate_rank, KdaGateRank::kLowRank);
  EXPECT_EQ(d->moe.input, ExpertInput::kHidden);
  EXPECT_EQ(d->attn_res.kind, ResidualKind::kPlain);
  EXPECT_EQ(d->moe.route_scope, RouteScope::kGlobal);
}

ordered_json DeepSeekConfig() {
  Result<gen::Preset> p = gen::MakePreset("deepseek-v3-tiny");
  EXPECT_TRUE(p.has_value());
  return p.has_value() ? p->config : ordered_json::object();
}

TEST(Family, GroupLimitedRoutingIsReadAsReleased) {
  ordered_json j = DeepSeekConfig();
  j["n_routed_experts"] = 16;
  j["num_experts"] = 16;
  j["n_group"] = 4;
  j["topk_group"] = 2;
  Result<ModelConfig> c = ReadConfig(j);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->moe.route_scope, RouteScope::kGroupLimited);
  EXPECT_EQ(c->moe.group_score, GroupScore::kTopTwoSum);  // topk_method noaux_tc
  EXPECT_EQ(c->moe.n_group, 4);
  EXPECT_EQ(c->moe.topk_group, 2);
  // Round trip through the engine's spellings keeps the choice.
  Result<ModelConfig> back = ReadConfig(ModelConfigToJson(*c));
  ASSERT_TRUE(back.has_value()) << back.error().ToString();
  EXPECT_EQ(back->moe, c->moe);

  j["topk_method"] = "group_limited_greedy";
  c = ReadConfig(j);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->moe.group_score, GroupScore::kMax);
  back = ReadConfig(ModelConfigToJson(*c));
  ASSERT_TRUE(back.has_value()) << back.error().ToString();
  EXPECT_EQ(back->moe, c->moe);

  j["topk_method"] = "greedy";  // DeepSeek-V2's plain top-k: groups unused
  c = ReadConfig(j);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->moe.route_scope, RouteScope::kGlobal);
  back = ReadConfig(ModelConfigToJson(*c));
  ASSERT_TRUE(back.has_value()) << back.error().ToString();
  EXPECT_EQ(back->moe, c->moe);
}

TEST(Family, KimiSpellingOfTheGroupCountIsRead) {
  ordered_json j = DeepSeekConfig();
  j.erase("n_group");
  j["num_expert_group"] = 2;
  j["topk_group"] = 1;
  Result<ModelConfig> c = ReadConfig(j);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->moe.n_group, 2);
  EXPECT_EQ(c->moe.route_scope, RouteScope::kGroupLimited);
}

TEST(Family, GroupLimitedRoutingThatCannotRunIsRefused) {
  ordered_json j = DeepSeekConfig();  // 8 experts, top 2
  j["n_group"] = 4;
  j["topk_group"] = 2;
  j["topk_method"] = "fancy";
  Result<ModelConfig> c = ReadConfig(j);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), Errc::kUnsupported);
  EXPECT_NE(c.error().message().find("topk_method is \"fancy\""), std::string::npos)
      << c.error().message();
  // The method is irrelevant when every group is kept.
  j["topk_group"] = 4;
  EXPECT_TRUE(ReadConfig(j).has_value());
  // One kept group of two experts cannot hold top 3.
  j["topk_method"] = "noaux_tc";
  j["topk_group"] = 1;
  j["num_experts_per_tok"] = 3;
  j["num_experts_per_token"] = 3;
  c = ReadConfig(j);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().message().find("num_experts_per_token 3"), std::string::npos)
      << c.error().message();
  // noaux_tc sums a group's two best experts: groups of one are refused.
  j["num_experts_per_tok"] = 2;
  j["num_experts_per_token"] = 2;
  j["n_group"] = 8;
  j["topk_group"] = 4;
  c = ReadConfig(j);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().message().find("one expert per group"), std::string::npos)
      << c.error().message();
}

TEST(Family, AllGroupsKeptIsTheGlobalTopK) {
  ordered_json j = DeepSeekConfig();
  j["n_group"] = 8;
  j["topk_group"] = 8;
  Result<ModelConfig> c = ReadConfig(j);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->moe.route_scope, RouteScope::kGlobal);
  EXPECT_EQ(c->moe.n_group, 8);
}

TEST(Family, GroupBoundsAreChecked) {
  ordered_json j = DeepSeekConfig();
  j["n_group"] = 3;  // 8 experts do not split into 3 groups
  j["topk_group"] = 1;
  Result<ModelConfig> c = ReadConfig(j);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), Errc::kFormat);
  j["n_group"] = 2;
  j["topk_group"] = 3;
  c = ReadConfig(j);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().message().find("topk_group = 3, expected 1..2"), std::string::npos)
      << c.error().message();
}

TEST(Family, SoftmaxScoresAreRead) {
  ordered_json j = DeepSeekConfig();
  j.erase("moe_router_activation_func");
  j["scoring_func"] = "softmax";
  Result<ModelConfig> c = ReadConfig(j);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->moe.score, RouterScore::kSoftmax);
  j["scoring_func"] = "tanh";
  c = ReadConfig(j);
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().message().find("\"tanh\""), std::string::npos) << c.error().message();
}

// DeepSeek-V2 routes as V3 does except that it leaves renormalised weights
// unscaled: that one combination is refused at open, never run differently.
TEST(Family, DeepSeekV2RunsItsRoutingAndRefusesScaledRenormalisation) {
  Result<gen::Preset> p = gen::MakePreset("deepseek-v2-tiny");
  ASSERT_TRUE(p.has_value());
  ordered_json j = p->config;
  Result<ModelConfig> c = ReadConfig(j);
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ(c->arch, "deepseek-v2");
  EXPECT_EQ(c->moe.score, RouterScore::kSoftmax);
  EXPECT_EQ(c->moe.group_score, GroupScore::kMax);
  EXPECT_EQ(c->moe.route_scope, RouteScope::kGroupLimited);

  j["moe_renormalize"] = true;  // norm_topk_prob true, routed_scaling_factor 2.5
  c = ReadConfig(j);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), Errc::kUnsupported);
  EXPECT_NE(c.error().message().find("norm_topk_prob true and routed_scaling_factor 2.5"),
            std::string::npos)
      << c.error().message();
  j["routed_scaling_factor"] = 1.0;  // nothing to scale: the same maths
  EXPECT_TRUE(ReadConfig(j).has_value());
  j["routed_scaling_factor"] = 2.5;
  j["num_experts_per_token"] = 1;  // one expert: V2 scales it too
  EXPECT_TRUE(ReadConfig(j).has_value());
  // DeepSeek-V3 renormalises and then scales, as the engine does.
  j["num_experts_per_token"] = 2;
  j["architectures"] = ordered_json::array({"DeepseekV3ForCausalLM"});
  EXPECT_TRUE(ReadConfig(j).has_value());
}

}  // namespace
}  // namespace waste
