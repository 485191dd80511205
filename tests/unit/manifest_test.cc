// ParseManifest: the fixture manifests, the dialect (first key wins, wrong
// types read as absent, switches by value), every refusal the engine owes
// (version, §3.7 bounds, rotary shapes, expert_quant, banks, trunk entries),
// family configs (DeepSeek aliases, text_config, _outer), parameter counts.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "container/container.h"
#include "container_test_util.h"
#include "format/rope_config.h"
#include "container/tensor_list.h"
#include "shared_fixtures.h"

namespace waste {
namespace {

using nlohmann::ordered_json;
using testing::FixtureDir;
using testing::ReadFile;

ordered_json FixtureManifest(const std::string& set = "warp-tiny") {
  return ordered_json::parse(ReadFile(FixtureDir(set) + "/manifest.json"));
}

Result<Manifest> Parse(const ordered_json& j) { return ParseManifest(j.dump()); }

// Parses `j` and expects a kFormat refusal whose message contains `needle`.
void ExpectRefused(const ordered_json& j, const std::string& needle) {
  Result<Manifest> m = Parse(j);
  ASSERT_FALSE(m.has_value()) << "accepted; expected: " << needle;
  EXPECT_EQ(m.error().code(), Errc::kFormat);
  EXPECT_NE(m.error().message().find(needle), std::string::npos)
      << "message: " << m.error().message() << "\nexpected: " << needle;
}

TEST(Manifest, TinyFixture) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  Result<Manifest> m = ParseManifest(ReadFile(FixtureDir("warp-tiny") + "/manifest.json"));
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.arch, "kimi-linear");
  EXPECT_EQ(c.architecture, "KimiLinearForCausalLM");
  EXPECT_EQ(c.tensor_prefix, "");
  EXPECT_EQ(c.n_layers, 4);
  EXPECT_EQ(c.hidden, 128);
  EXPECT_EQ(c.vocab, 256);
  EXPECT_EQ(c.mla.n_heads, 4);
  EXPECT_EQ(c.moe.n_experts, 8);
  EXPECT_EQ(c.moe.top_k, 2);
  EXPECT_EQ(c.moe.inter, 64);
  EXPECT_EQ(c.dense_inter, 256);
  EXPECT_EQ(c.moe.n_shared, 1);
  EXPECT_EQ(c.moe.first_dense, 1);
  EXPECT_EQ(c.mla.q_lora_rank, 0);  // null
  EXPECT_EQ(c.mla.kv_lora_rank, 32);
  EXPECT_EQ(c.mla.qk_nope, 16);
  EXPECT_EQ(c.mla.qk_rope, 8);
  EXPECT_EQ(c.mla.v_head, 16);
  EXPECT_EQ(c.kda.heads, 4);
  EXPECT_EQ(c.kda.head_dim, 32);
  EXPECT_EQ(c.kda.conv_k, 4);
  EXPECT_EQ(c.eos_token_id, 2);
  EXPECT_FLOAT_EQ(c.moe.routed_scaling, 2.0f);
  EXPECT_FLOAT_EQ(c.rms_eps, 1e-5f);
  EXPECT_TRUE(c.moe.renormalize);
  EXPECT_TRUE(c.mla.nope);
  EXPECT_FALSE(c.rope.enabled);
  EXPECT_EQ(c.act, Activation::kSilu);
  const AttnKind kda = AttnKind::kKda, mla = AttnKind::kMla;
  EXPECT_EQ(c.attn_kind, (std::vector<AttnKind>{kda, kda, mla, kda}));
  EXPECT_EQ(c.ffn_kind,
            (std::vector<FfnKind>{FfnKind::kDense, FfnKind::kMoe, FfnKind::kMoe, FfnKind::kMoe}));
  EXPECT_EQ(c.n_kda_layers(), 3);
  EXPECT_EQ(c.n_mla_layers(), 1);
  EXPECT_EQ(c.n_moe_layers(), 3);
  EXPECT_EQ(c.quant.stages, 3);
  EXPECT_EQ(c.quant.vec_dim, 8);
  EXPECT_EQ(c.quant.entries, 256);
  EXPECT_EQ(c.quant.index_bits, 8);  // absent => 8
  EXPECT_EQ(c.quant.fmt_name, "VQ3R");
  ASSERT_EQ(m->banks.size(), 4u);
  EXPECT_EQ(m->banks[0].layer, -1);
  for (int l = 1; l < 4; ++l) {
    EXPECT_EQ(m->banks[l].layer, l);
    EXPECT_EQ(m->banks[l].file, "experts-L" + std::to_string(l) + ".bin");
    EXPECT_EQ(m->banks[l].experts, 8);
    EXPECT_EQ(m->banks[l].bytes, 98304u);
    EXPECT_EQ(m->banks[l].record_bytes, 12288u);
    EXPECT_EQ(m->banks[l].codebook_base, 9 * (l - 1));
  }
  ASSERT_EQ(m->trunk.size(), 79u);
  EXPECT_EQ(m->trunk[0].name, "model.embed_tokens.weight");
  EXPECT_EQ(m->trunk[0].fmt, TensorFmt::kQ8G);
  EXPECT_EQ(m->trunk[0].scale_off, 32768u);
  EXPECT_EQ(m->trunk[0].bytes, 33280u);
  EXPECT_EQ(m->trunk[2].shape, (std::vector<int64_t>{128}));
  EXPECT_TRUE(ValidateRequiredTensors(*m).ok());
}

TEST(Manifest, ParameterCountsEqualMetaJson) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  for (const auto& [set, total, active] :
       {std::tuple{"warp-tiny", 1113764ull, 638628ull},
        std::tuple{"warp-tiny-tok", 1129124ull, 646308ull}}) {
    Result<Manifest> m = ParseManifest(ReadFile(FixtureDir(set) + "/manifest.json"));
    ASSERT_TRUE(m.has_value());
    ParamCounts p = CountParameters(*m);
    EXPECT_EQ(p.total, total) << set;
    EXPECT_EQ(p.active, active) << set;
    EXPECT_EQ(QuantizationSummary(*m), "experts VQ3R, trunk Q4G/Q8G/F32");
  }
}

TEST(Manifest, FormatVersion) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ordered_json j = FixtureManifest();
  j["format_version"] = 1;
  ExpectRefused(j, "format version mismatch");
  j["format_version"] = 999;
  ExpectRefused(j, "format version mismatch");
  j["format_version"] = "0";
  ExpectRefused(j, "format version missing");
  j.erase("format_version");
  ExpectRefused(j, "format version missing");
  j["format_version"] = 0.5;  // the reference truncates toward zero
  EXPECT_TRUE(Parse(j).has_value());
}

TEST(Manifest, NotJsonOrNotAnObject) {
  for (std::string text : {"", "{", "[1,2]", "null", "{\"format_version\": 0,", "\x01\x02",
                           "{\"format_version\": 0} trailing"}) {
    Result<Manifest> m = ParseManifest(text);
    EXPECT_FALSE(m.has_value()) << text;
    if (!m.has_value()) EXPECT_EQ(m.error().code(), Errc::kFormat);
  }
}

TEST(Manifest, FirstDuplicateKeyWins) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  std::string text = ReadFile(FixtureDir("warp-tiny") + "/manifest.json");
  // A second hidden_size (nested object value) and a second config after the first.
  size_t at = text.find("\"hidden_size\": 128,");
  ASSERT_NE(at, std::string::npos);
  text.insert(at + std::string("\"hidden_size\": 128,").size(),
              "\n  \"hidden_size\": {\"deep\": [1, {\"x\": 2}]},");
  size_t end = text.rfind('}');
  text.insert(end, ", \"config\": {\"hidden_size\": 0}");
  Result<Manifest> m = ParseManifest(text);
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  EXPECT_EQ(m->config.hidden, 128);
}

TEST(Manifest, NestingDeeperThan64IsRefused) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ordered_json j = FixtureManifest();
  std::string text = j.dump();
  std::string deep = std::string(70, '[') + std::string(70, ']');
  text.insert(text.rfind('}'), ", \"extra\": " + deep);
  Result<Manifest> m = ParseManifest(text);
  ASSERT_FALSE(m.has_value());
  EXPECT_NE(m.error().message().find("deeper than 64"), std::string::npos);
}

TEST(Manifest, ConfigBounds) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  struct Case {
    const char* key;
    ordered_json value;
  } cases[] = {
      {"num_hidden_layers", 0},    {"num_hidden_layers", 129}, {"hidden_size", 0},
      {"hidden_size", 1 << 21},    {"hidden_size", 1e300},     {"vocab_size", (1 << 24) + 1},
      {"num_attention_heads", 0},  {"num_experts_per_token", 9}, {"num_experts_per_token", 0},
      {"moe_intermediate_size", 0}, {"first_k_dense_replace", 5}, {"num_shared_experts", 65},
      {"kv_lora_rank", 0},         {"v_head_dim", 0},          {"attn_res_block_size", 5},
      {"intermediate_size", 0},    {"num_experts", 70000},     {"qk_nope_head_dim", -1},
  };
  for (const Case& c : cases) {
    ordered_json j = FixtureManifest();
    j["config"][c.key] = c.value;
    ExpectRefused(j, c.key);
  }
  for (double eps : {0.0, 1.0, -1e-5}) {
    ordered_json j = FixtureManifest();
    j["config"]["rms_norm_eps"] = eps;
    ExpectRefused(j, "rms_norm_eps");
  }
  ordered_json j = FixtureManifest();
  j["config"]["linear_attn_config"]["num_heads"] = 0;
  ExpectRefused(j, "linear_attn_config.num_heads");
  j = FixtureManifest();
  j["config"]["linear_attn_config"]["short_conv_kernel_size"] = 65;
  ExpectRefused(j, "short_conv_kernel_size");
  j = FixtureManifest();
  j["config"].erase("hidden_size");  // absent => 0
  ExpectRefused(j, "hidden_size");
}

TEST(Manifest, WrongTypesReadAsAbsent) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ordered_json j = FixtureManifest();
  j["config"]["rms_norm_eps"] = "1e-5";           // string: default 1e-5
  j["config"]["routed_scaling_factor"] = nullptr;  // default 1.0
  j["config"]["eos_token_id"] = ordered_json::array({2, 3});
  Result<Manifest> m = Parse(j);
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  EXPECT_FLOAT_EQ(m->config.rms_eps, 1e-5f);
  EXPECT_FLOAT_EQ(m->config.moe.routed_scaling, 1.0f);
  EXPECT_EQ(m->config.eos_token_id, 0);
  j["config"]["hidden_size"] = "128";  // absent => 0 => out of range
  ExpectRefused(j, "hidden_size = 0");
}

TEST(Manifest, SwitchesAreReadByValue) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  for (const auto& [value, on] : {std::pair{ordered_json(true), true},
                                  std::pair{ordered_json(false), false},
                                  std::pair{ordered_json(nullptr), false}}) {
    ordered_json j = FixtureManifest();
    j["config"]["moe_renormalize"] = value;
    j["config"]["mla_use_output_gate"] = value;
    j["config"]["latent_moe_use_norm"] = value;
    Result<Manifest> m = Parse(j);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->config.moe.renormalize, on);
    EXPECT_EQ(m->config.mla.output_gate, on);
    EXPECT_EQ(m->config.moe.latent_norm, on);
  }
  ordered_json j = FixtureManifest();
  j["config"].erase("moe_renormalize");
  EXPECT_FALSE(Parse(j)->config.moe.renormalize);
  j["config"]["moe_renormalize"] = "yes";
  ExpectRefused(j, "not true or false");
  j = FixtureManifest();
  j["config"]["linear_attn_config"]["use_full_rank_gate"] = 1;
  ExpectRefused(j, "use_full_rank_gate");
}

TEST(Manifest, MlaUseNopeMustBeBoolean) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ordered_json j = FixtureManifest();
  j["config"]["mla_use_nope"] = "yes";
  ExpectRefused(j, "not true or false");
  j["config"]["mla_use_nope"] = 1;
  ExpectRefused(j, "not true or false");
}

// A DeepSeek-V3-shaped manifest: rotary on, q LoRA, the fixture's layers.
ordered_json RopeManifest() {
  ordered_json j = FixtureManifest();
  j["config"]["mla_use_nope"] = false;
  return j;
}

TEST(Manifest, RotaryShapes) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ordered_json j = RopeManifest();
  Result<Manifest> plain = Parse(j);
  ASSERT_TRUE(plain.has_value());
  EXPECT_TRUE(plain->config.rope.enabled);
  EXPECT_FALSE(plain->config.rope.yarn);
  ASSERT_EQ(plain->config.rope.omega.size(), 4u);
  EXPECT_EQ(plain->config.rope.omega[0], 1.0f);
  EXPECT_EQ(plain->config.rope.omega[1], static_cast<float>(std::pow(10000.0, -2.0 / 8)));

  // mla_use_nope false == absent; rope_scaling null and {} == absent.
  j.at("config").erase("mla_use_nope");
  for (ordered_json rs : {ordered_json(nullptr), ordered_json::object()}) {
    j["config"]["rope_scaling"] = rs;
    Result<Manifest> m = Parse(j);
    ASSERT_TRUE(m.has_value());
    EXPECT_EQ(m->config.rope.omega, plain->config.rope.omega);
    EXPECT_EQ(m->config.rope.att_mul, 1.0f);
  }

  j = RopeManifest();
  j["config"]["rope_scaling"] = {{"type", "linear"}, {"factor", 4.0}};
  ExpectRefused(j, "not implemented, only yarn");
  j["config"]["rope_scaling"] = {{"factor", 4.0}};
  ExpectRefused(j, "carries no type");
  j["config"]["rope_scaling"] = {{"type", "yarn"}, {"factor", 40.0}, {"mscale", 1.0}};
  ExpectRefused(j, "not implemented");  // mscale_all_dim defaults to 0
  j["config"]["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 0.5}};
  EXPECT_TRUE(Parse(j).has_value());    // factor <= 1: plain, no mscale check
  j["config"]["qk_rope_head_dim"] = 130;
  ExpectRefused(j, "needs rotation");
  j["config"]["mla_use_nope"] = true;   // NoPE: the rotary block is not inspected
  j["config"]["rope_scaling"] = {{"type", "linear"}};
  EXPECT_TRUE(Parse(j).has_value());
}

TEST(Manifest, YarnMatchesModelMdSanityValues) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  struct Case {
    double theta, factor, beta_fast, beta_slow;
    int low, high;
    float att_mul;
  } cases[] = {{10000, 40, 32, 1, 10, 23, 1.8738542f},   // DeepSeek-V3/R1
               {50000, 32, 1, 1, 19, 20, 1.8132604f}};   // Kimi K2
  for (const Case& c : cases) {
    ordered_json j = RopeManifest();
    j["config"]["qk_rope_head_dim"] = 64;
    j["config"]["rope_theta"] = c.theta;
    j["config"]["rope_scaling"] = {{"type", "yarn"},
                                   {"factor", c.factor},
                                   {"mscale", 1.0},
                                   {"mscale_all_dim", 1.0},
                                   {"beta_fast", c.beta_fast},
                                   {"beta_slow", c.beta_slow},
                                   {"original_max_position_embeddings", 4096}};
    Result<Manifest> m = Parse(j);
    ASSERT_TRUE(m.has_value()) << m.error().ToString();
    const RopeConfig& r = m->config.rope;
    EXPECT_TRUE(r.yarn);
    EXPECT_NEAR(r.att_mul, c.att_mul, 1e-6);
    std::vector<float> plain;
    PlainRopeFrequencies(c.theta, 64, plain);
    ASSERT_EQ(r.omega.size(), 32u);
    for (int i = 0; i < 32; ++i) {
      if (i <= c.low) EXPECT_EQ(r.omega[i], plain[i]) << i;  // untouched below low
      if (i >= c.high) {
        EXPECT_EQ(r.omega[i], static_cast<float>(static_cast<double>(plain[i]) / c.factor)) << i;
      }
      if (i > c.low && i < c.high) {
        EXPECT_LT(r.omega[i], plain[i]);
        EXPECT_GT(r.omega[i], plain[i] / c.factor);
      }
    }
  }
}

TEST(Manifest, ExpertQuantBounds) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  struct Case {
    const char* key;
    ordered_json value;
    const char* needle;
  } cases[] = {{"stages", 9, "stages"},         {"stages", 0, "stages"},
               {"vec_dim", 0, "vec_dim"},       {"vec_dim", 65, "vec_dim"},
               {"entries", 257, "entries"},     {"index_bits", 6, "index_bits"},
               {"index_bits", 4, "index_bits"}, {"index_block", 32, "index_block"},
               {"index_block", "64", "index_block"}};
  for (const Case& c : cases) {
    ordered_json j = FixtureManifest();
    j["expert_quant"][c.key] = c.value;
    ExpectRefused(j, c.needle);
  }
  // VQ4P geometry is accepted (the banks then do not match: refused there).
  ordered_json j = FixtureManifest();
  j["expert_quant"]["stages"] = 4;
  j["expert_quant"]["entries"] = 64;
  j["expert_quant"]["index_bits"] = 6;
  Result<Manifest> m = Parse(j);
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  EXPECT_EQ(m->config.quant.fmt_name, "VQ4P");
  // A vec_dim that does not divide the expert widths is refused.
  j = FixtureManifest();
  j["expert_quant"]["vec_dim"] = 48;
  ExpectRefused(j, "vec_dim");
}

TEST(Manifest, BankIndexRules) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ordered_json j = FixtureManifest();
  j["layers"]["1"]["file"] = "../experts-L1.bin";
  ExpectRefused(j, "inside the container");
  j["layers"]["1"]["file"] = "sub/experts-L1.bin";
  ExpectRefused(j, "inside the container");
  j["layers"]["1"]["file"] = std::string(64, 'x');
  ExpectRefused(j, "at most 63");
  j = FixtureManifest();
  j["layers"]["2"]["experts"] = 7;
  ExpectRefused(j, "experts = 7");
  j = FixtureManifest();
  j["layers"]["2"]["bytes"] = 98305;
  ExpectRefused(j, "bytes = 98305");
  j = FixtureManifest();
  j["layers"]["2"]["bytes"] = 8 * 4096;  // records smaller than one expert needs
  ExpectRefused(j, "smaller than");
  j = FixtureManifest();
  j["layers"]["2"]["bytes"] = 8 * 12289;
  ExpectRefused(j, "layers.\"2\"");
  j = FixtureManifest();
  j["layers"].erase("3");
  ExpectRefused(j, "layers.\"3\"");
  j = FixtureManifest();
  j["layers"]["0"] = j["layers"]["1"];
  ExpectRefused(j, "dense");
  j = FixtureManifest();
  j["layers"]["1"]["codebook_base"] = -1;
  ExpectRefused(j, "codebook_base");
  j = FixtureManifest();
  j["layers"]["7"] = j["layers"]["1"];  // past num_hidden_layers: ignored
  EXPECT_TRUE(Parse(j).has_value());
}

TEST(Manifest, TrunkEntryRules) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  struct Case {
    const char* key;
    ordered_json value;
    const char* needle;
  } cases[] = {{"fmt", 1, "fmt 1"},
               {"fmt", 4, "fmt 4"},
               {"shape", ordered_json::array(), "shape"},
               {"shape", ordered_json::array({1, 1, 1, 1, 1}), "shape"},
               {"shape", ordered_json::array({0, 128}), "shape[0]"},
               {"shape", ordered_json::array({128, (1 << 26) + 1}), "shape[1]"},
               {"shape", ordered_json::array({1 << 26, 1 << 26, 1 << 26}), "2^40"},
               {"group", 12, "group = 12"},
               {"group", 0, "group = 0"},
               {"off", -5, "off = -5"},
               {"scale_off", -1, "scale_off"}};
  for (const Case& c : cases) {
    ordered_json j = FixtureManifest();
    j["trunk"][3][c.key] = c.value;
    ExpectRefused(j, c.needle);
  }
  ordered_json j = FixtureManifest();
  j["trunk"] = "nope";
  ExpectRefused(j, "trunk");
}

TEST(Manifest, RequiredTensors) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ordered_json j = FixtureManifest();
  j["trunk"][3]["name"] = "model.layers.0.self_attn.q_proj.weightX";
  Result<Manifest> m = Parse(j);
  ASSERT_TRUE(m.has_value());
  Status st = ValidateRequiredTensors(*m);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("required tensor is missing or has the wrong shape: "
                              "model.layers.0.self_attn.q_proj.weight"),
            std::string::npos)
      << st.message();

  j = FixtureManifest();
  j["trunk"][3]["shape"] = ordered_json::array({128, 64});
  st = ValidateRequiredTensors(*Parse(j));
  EXPECT_NE(st.message().find("q_proj"), std::string::npos);
  j = FixtureManifest();
  j["trunk"][1]["fmt"] = 2;  // a norm must be F32
  j["trunk"][1]["group"] = 128;
  st = ValidateRequiredTensors(*Parse(j));
  EXPECT_NE(st.message().find("input_layernorm"), std::string::npos);
  j = FixtureManifest();
  j["trunk"][15]["shape"] = ordered_json::array({1, 1, 3, 1});  // A_log needs >= 4
  st = ValidateRequiredTensors(*Parse(j));
  EXPECT_NE(st.message().find("A_log"), std::string::npos);
  // The optional router bias may be absent, but not a short F32.
  j = FixtureManifest();
  j["trunk"][39]["shape"] = ordered_json::array({7});
  ASSERT_EQ(j["trunk"][39]["name"], "model.layers.1.block_sparse_moe.gate.e_score_correction_bias");
  st = ValidateRequiredTensors(*Parse(j));
  EXPECT_NE(st.message().find("e_score_correction_bias"), std::string::npos);
  j["trunk"][39]["name"] = "unused";
  EXPECT_TRUE(ValidateRequiredTensors(*Parse(j)).ok());
}

TEST(Manifest, KdaLayersOutsideRangeIgnored) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ordered_json j = FixtureManifest();
  j["config"]["linear_attn_config"]["kda_layers"] = {1, 2, 4, 0, -3, 200, "x", 2.7};
  Result<Manifest> m = Parse(j);
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(m->config.n_kda_layers(), 3);
}

TEST(Manifest, DeepSeekAliases) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ordered_json j = FixtureManifest();
  ordered_json& c = j["config"];
  c["n_routed_experts"] = c["num_experts"];
  c["num_experts_per_tok"] = c["num_experts_per_token"];
  c["n_shared_experts"] = 2;
  c["norm_topk_prob"] = true;
  c.erase("num_experts");
  c.erase("num_experts_per_token");
  c.erase("num_shared_experts");
  c.erase("moe_renormalize");
  c["moe_intermediate_size"] = 64;
  Result<Manifest> m = Parse(j);
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  EXPECT_EQ(m->config.moe.n_experts, 8);
  EXPECT_EQ(m->config.moe.top_k, 2);
  EXPECT_EQ(m->config.moe.n_shared, 2);
  EXPECT_TRUE(m->config.moe.renormalize);
  // The engine spelling wins when both exist.
  c["num_experts_per_token"] = 1;
  EXPECT_EQ(Parse(j)->config.moe.top_k, 1);
}

TEST(Manifest, TextConfigAndOuterArchitecture) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ordered_json j = FixtureManifest();
  ordered_json text = j["config"];
  j["config"] = {{"architectures", ordered_json::array({"SomethingElse"})},
                 {"text_config", text},
                 {"_outer", {{"architectures", ordered_json::array({"KimiK3ForConditionalGeneration"})}}}};
  Result<Manifest> m = Parse(j);
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  EXPECT_EQ(m->config.tensor_prefix, "language_model.");
  EXPECT_EQ(m->config.hidden, 128);
  EXPECT_EQ(m->config.arch, "kimi-k3");
  EXPECT_EQ(m->config.architecture, "KimiK3ForConditionalGeneration");
  j["config"].erase("_outer");
  j["config"]["architectures"] = ordered_json::array({"DeepseekV3ForCausalLM"});
  j["config"]["text_config"].erase("architectures");
  EXPECT_EQ(Parse(j)->config.arch, "deepseek-v3");  // the family key (model/families.cc)
  j["config"]["architectures"] = ordered_json::array({"MysteryForCausalLM"});
  EXPECT_EQ(Parse(j)->config.arch, "MysteryForCausalLM");  // no family: the raw name
  j["config"].erase("architectures");
  EXPECT_EQ(Parse(j)->config.arch, "unknown");
}

TEST(Manifest, ParseManifestConfigNeedsNoIndex) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ordered_json j = FixtureManifest();
  j.erase("layers");
  j.erase("trunk");
  EXPECT_FALSE(Parse(j).has_value());
  Result<Manifest> m = ParseManifestConfig(j.dump());
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  EXPECT_EQ(m->config.n_moe_layers(), 3);
  EXPECT_TRUE(m->trunk.empty());
}

TEST(Manifest, ModelTensorsOfTheFixtureInOrder) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  Result<Manifest> m = ParseManifest(ReadFile(FixtureDir("warp-tiny") + "/manifest.json"));
  ASSERT_TRUE(m.has_value());
  std::vector<TensorSpec> specs = ModelTensors(m->config);
  ASSERT_EQ(specs.size(), m->trunk.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(specs[i].name, m->trunk[i].name);
    EXPECT_EQ(specs[i].shape, m->trunk[i].shape) << specs[i].name;
  }
}

}  // namespace
}  // namespace waste
