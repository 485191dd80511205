// waste convert end to end on checkpoints written by waste-gen --checkpoint
// in each family's published layout (bf16, fp8, MXFP4 and Kimi-K2-Thinking's
// int4, the last checked against the numpy oracle's decoder): the container
// opens, waste verify
// --source finds it sound, eval runs on it, the bytes do not depend on the
// thread count, and a conversion killed at any point and rerun ends with
// the same bytes as an uninterrupted one.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint_gen.h"
#include "container/container.h"
#include "convert/dequant.h"
#include "convert/safetensors.h"
#include "convert/source_model.h"
#include "model/families.h"
#include "temp_dir.h"
#include "waste/convert.h"

#ifdef WASTE_CLI_BINARY
#include <signal.h>

#include "cli/subprocess.h"
#endif

namespace waste {
namespace {

using waste::testing::TempDir;

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Every file of a finished container (what the engine reads, plus the
// converter's own state).
const std::vector<std::string> kFiles = {"manifest.json", "trunk.bin", "codebooks.bin", "experts-L1.bin",
                                         "experts-L2.bin", "experts-L3.bin", "tokenizer.model",
                                         "specials.json", "chat_template.jinja", "convert.json"};

void ExpectSameFiles(const std::string& a, const std::string& b) {
  for (const std::string& f : kFiles) {
    ASSERT_TRUE(std::filesystem::exists(a + "/" + f)) << f;
    EXPECT_TRUE(Slurp(a + "/" + f) == Slurp(b + "/" + f)) << f << " differs";
  }
}

std::string MakeCheckpoint(const TempDir& dir, const std::string& preset, gen::CheckpointDType dtype,
                           bool tokenizer, const std::string& override_json = "", int vocab = 512,
                           uint64_t seed = 5) {
  gen::CheckpointOptions o;
  o.out_dir = dir / "ckpt";
  o.preset = preset;
  o.dtype = dtype;
  o.tokenizer = tokenizer;
  o.vocab = vocab;  // 512: embedding and head reach Q8G
  o.override_json = override_json;
  o.seed = seed;
  auto r = gen::GenerateCheckpoint(o);
  EXPECT_TRUE(r) << r.error().message();
  return o.out_dir;
}

Result<ConvertReport> ConvertNow(const std::string& src, const std::string& out, int threads,
                          std::vector<int> layers = {}) {
  ConvertOptions o;
  o.source_dir = src;
  o.out_dir = out;
  o.threads = threads;
  o.layers = std::move(layers);
  o.seed = 3;
  return Convert(o);
}

void ExpectSound(const std::string& out, const std::string& src, double expert_bound,
                 double trunk_bound = 0.15) {
  VerifyOptions v;
  v.container_dir = out;
  v.source_dir = src;
  v.threads = 2;
  auto r = Verify(v);
  ASSERT_TRUE(r) << r.error().message();
  for (const std::string& p : r->problems) ADD_FAILURE() << p;
  EXPECT_TRUE(r->sound);
  EXPECT_GT(r->records_checked, 0u);
  EXPECT_LT(r->expert_median_error, expert_bound);
  EXPECT_LT(r->trunk_max_error, trunk_bound);
}

TEST(ConvertE2E, KimiLinearConvertsOpensVerifiesAndEvaluates) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, true);
  auto rep = ConvertNow(src, dir / "out", 2);
  ASSERT_TRUE(rep) << rep.error().message();
  EXPECT_TRUE(rep->complete);
  EXPECT_EQ(rep->family, "kimi-linear");
  ASSERT_EQ(rep->layers.size(), 3u);
  for (const ConvertLayerReport& l : rep->layers) {
    for (double e : l.rel_error) EXPECT_LT(e, 0.25);  // VQ3R on heavy-tailed weights
  }
  auto c = Container::Open(dir / "out");
  ASSERT_TRUE(c) << c.error().message();
  EXPECT_EQ((*c)->config().moe.n_experts, 8);
  ExpectSound(dir / "out", src, 0.23);
#ifdef WASTE_CLI_BINARY
  test::ProcessResult p = test::RunProcess({WASTE_CLI_BINARY, "eval", dir / "out", "hello world"});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_FALSE(p.out.empty());
#endif
}

TEST(ConvertE2E, BytesDoNotDependOnTheThreadCount) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, true);
  ASSERT_TRUE(ConvertNow(src, dir / "one", 1));
  ASSERT_TRUE(ConvertNow(src, dir / "three", 3));
  ExpectSameFiles(dir / "one", dir / "three");
}

TEST(ConvertE2E, LayerSubsetsThenTheRestGiveTheSameContainer) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, true);
  ASSERT_TRUE(ConvertNow(src, dir / "whole", 2));
  auto part = ConvertNow(src, dir / "steps", 2, {2});
  ASSERT_TRUE(part);
  EXPECT_FALSE(part->complete);
  EXPECT_EQ(part->layers_finished, 1);
  EXPECT_FALSE(std::filesystem::exists(dir / "steps/manifest.json"));
  auto rest = ConvertNow(src, dir / "steps", 2);
  ASSERT_TRUE(rest);
  EXPECT_TRUE(rest->complete);
  EXPECT_TRUE(rest->trunk_cached);
  int cached = 0;
  for (const ConvertLayerReport& l : rest->layers) cached += l.cached;
  EXPECT_EQ(cached, 1);
  ExpectSameFiles(dir / "whole", dir / "steps");
}

TEST(ConvertE2E, DamagedFinishedFilesAreRedoneNotTrusted) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, true);
  ASSERT_TRUE(ConvertNow(src, dir / "a", 2));
  ASSERT_TRUE(ConvertNow(src, dir / "b", 2));
  {  // flip one byte inside a finished bank: same size, wrong contents
    std::fstream f(dir / "b/experts-L2.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(5000);
    f.put('\x5A');
  }
  auto again = ConvertNow(src, dir / "b", 2);
  ASSERT_TRUE(again);
  for (const ConvertLayerReport& l : again->layers) EXPECT_EQ(l.cached, l.layer != 2) << l.layer;
  ExpectSameFiles(dir / "a", dir / "b");
}

#ifdef WASTE_CLI_BINARY
TEST(ConvertE2E, KilledAnywhereThenRerunIsByteIdentical) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, true);
  ASSERT_TRUE(ConvertNow(src, dir / "clean", 2));
  // Time a whole CLI run, then kill fresh runs at spread-out points of it.
  const auto t0 = std::chrono::steady_clock::now();
  test::ProcessResult full = test::RunProcess({WASTE_CLI_BINARY, "convert", src, dir / "timing", "--threads", "2", "--seed", "3"});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string out = dir / "killed";
  int kills = 0;
  for (double f : {0.05, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9}) {
    auto p = test::Subprocess::Spawn({WASTE_CLI_BINARY, "convert", src, out, "--threads", "2", "--seed", "3"});
    ASSERT_NE(p, nullptr);
    std::this_thread::sleep_for(std::chrono::duration<double>(f * total));
    if (!p->exited()) {
      p->Signal(SIGKILL);
      ++kills;
    }
    p->Wait(60);
  }
  test::ProcessResult last = test::RunProcess({WASTE_CLI_BINARY, "convert", src, out, "--threads", "2", "--seed", "3"});
  ASSERT_EQ(last.exit_code, 0) << last.err;
  ExpectSameFiles(dir / "clean", out);
  std::printf("killed %d runs at spread-out points of a %.2f s conversion\n", kills, total);
}

TEST(ConvertE2E, CliVerifyExitStatusSaysWhetherSound) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, false);
  ASSERT_TRUE(ConvertNow(src, dir / "out", 2));
  test::ProcessResult ok = test::RunProcess({WASTE_CLI_BINARY, "verify", dir / "out", "--source", src});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  {
    std::fstream f(dir / "out/experts-L3.bin", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    f.put('\x11');
  }
  test::ProcessResult bad = test::RunProcess({WASTE_CLI_BINARY, "verify", dir / "out"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.out.find("crc"), std::string::npos) << bad.out;
}
// DeepSeek-V3/R1 ship only a Hugging Face tokenizer.json: converted, the
// container tokenizes through `waste tokenize` with the release's ids
// (tools/hf_tokenizer_ref.py reads the same tokenizer.json on its own).
TEST(ConvertE2E, DeepSeekTokenizerJsonTokenizesThroughTheCli) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "deepseek-v3-tiny", gen::CheckpointDType::kFp8, false,
                                         R"({"bos_token_id": 0, "eos_token_id": 1})", 1024);
  std::filesystem::copy_file(std::string(WASTE_SOURCE_DIR) + "/tests/data/deepseek_tokenizer.json",
                             src + "/tokenizer.json");
  auto rep = ConvertNow(src, dir / "out", 2);
  ASSERT_TRUE(rep) << rep.error().message();
  for (const char* f : {"tokenizer.model", "specials.json", "pretokenizer.json"}) {
    EXPECT_TRUE(std::filesystem::exists(dir / ("out/" + std::string(f)))) << f;
  }
  const std::string text = "<｜User｜>深度求索 1234567 😀 don't\n  x<｜Assistant｜>";
  std::string cases = nlohmann::json(std::vector<std::string>{text}).dump();
  std::ofstream(dir / "cases.json") << cases;
  for (bool plain : {false, true}) {
    const std::string cmd = std::string(WASTE_PYTHON) + " " + WASTE_SOURCE_DIR + "/tools/hf_tokenizer_ref.py " +
                            src + "/tokenizer.json " + (dir / "cases.json") + (plain ? " --plain" : "");
    test::ProcessResult ref = test::RunProcess({"/bin/sh", "-c", cmd});
    if (ref.exit_code != 0) GTEST_SKIP() << "tools/hf_tokenizer_ref.py cannot run: " << ref.err;
    const std::vector<int> expected = nlohmann::json::parse(ref.out)[0].get<std::vector<int>>();
    std::vector<std::string> args = {WASTE_CLI_BINARY, "tokenize", dir / "out", text, "--json"};
    if (plain) args.push_back("--plain");
    test::ProcessResult p = test::RunProcess(args);
    ASSERT_EQ(p.exit_code, 0) << p.err;
    EXPECT_EQ(nlohmann::json::parse(p.out)["ids"].get<std::vector<int>>(), expected) << (plain ? "plain" : "markup");
  }
}

// A tokenizer.json that cannot be converted stops the conversion before
// any layer is encoded, naming the file and the field.
#endif

TEST(ConvertE2E, BrokenTokenizerJsonStopsBeforeTheLayers) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "deepseek-v3-tiny", gen::CheckpointDType::kFp8, false);
  nlohmann::json tok = nlohmann::json::parse(Slurp(std::string(WASTE_SOURCE_DIR) + "/tests/data/deepseek_tokenizer.json"));
  tok["pre_tokenizer"]["pretokenizers"][0]["type"] = "Digits";
  std::ofstream(src + "/tokenizer.json") << tok.dump();
  auto r = ConvertNow(src, dir / "out", 2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("tokenizer.json: pre_tokenizer.pretokenizers[0].type"), std::string::npos)
      << r.error().message();
  EXPECT_FALSE(std::filesystem::exists(dir / "out/experts-L1.bin"));
}

TEST(ConvertE2E, DeepSeekFp8AndK3Mxfp4Convert) {
  for (auto [preset, dtype] : {std::pair{"deepseek-v3-tiny", gen::CheckpointDType::kFp8},
                               std::pair{"k3-tiny", gen::CheckpointDType::kMxfp4}}) {
    TempDir dir;
    const std::string src = MakeCheckpoint(dir, preset, dtype, false);
    auto rep = ConvertNow(src, dir / "out", 2);
    ASSERT_TRUE(rep) << preset << ": " << rep.error().message();
    EXPECT_TRUE(rep->complete) << preset;
    ExpectSound(dir / "out", src, 0.25);
  }
}

// Kimi-K2-Thinking's routed experts: compressed-tensors "pack-quantized"
// int4 (I32 words, bf16 group scales, W_shape), from waste-gen --dtype int4.
std::string MakeInt4Checkpoint(const TempDir& dir, int group, bool shared_experts, bool tokenizer) {
  gen::CheckpointOptions o;
  o.out_dir = dir / "int4";
  o.preset = "deepseek-v3-tiny";
  o.dtype = gen::CheckpointDType::kInt4;
  o.int4_group = group;
  o.int4_shared_experts = shared_experts;
  o.tokenizer = tokenizer;
  o.vocab = 512;
  o.seed = 5;
  auto r = gen::GenerateCheckpoint(o);
  EXPECT_TRUE(r) << r.error().message();
  return o.out_dir;
}

#ifdef WASTE_CLI_BINARY
// The converter's int4 reader against the numpy oracle's own decoder
// (tools/oracle/dequant_checkpoint.py, written from the format's description):
// the oracle rewrites the checkpoint with every packed matrix as F32; each
// matrix then loads to the same bits from both, and converting either gives
// the same container. Groups of 48 leave a partial last group in every
// matrix (128 = 48 + 48 + 32 columns, 64 = 48 + 16), and the shared experts
// are packed too (trunk matrices read through W_packed).
TEST(ConvertE2E, Int4PackQuantizedEqualsTheOraclesF32Copy) {
  if (!std::filesystem::exists(WASTE_PYTHON)) GTEST_SKIP() << WASTE_PYTHON << " not found";
  if (test::RunProcess({WASTE_PYTHON, "-c", "import numpy"}).exit_code != 0) {
    GTEST_SKIP() << "numpy is not available to " << WASTE_PYTHON;
  }
  TempDir dir;
  const std::string src = MakeInt4Checkpoint(dir, 48, true, true);
  const std::string f32 = dir / "f32";
  test::ProcessResult p = test::RunProcess(
      {WASTE_PYTHON, std::string(WASTE_SOURCE_DIR) + "/tools/oracle/dequant_checkpoint.py", src, f32});
  ASSERT_EQ(p.exit_code, 0) << p.err;

  auto ck4 = convert::Checkpoint::Open(src);
  auto ck32 = convert::Checkpoint::Open(f32);
  ASSERT_TRUE(ck4) << ck4.error().message();
  ASSERT_TRUE(ck32) << ck32.error().message();
  auto m4 = convert::DescribeSource(**ck4);
  auto m32 = convert::DescribeSource(**ck32);
  ASSERT_TRUE(m4) << m4.error().message();
  ASSERT_TRUE(m32) << m32.error().message();
  EXPECT_TRUE(m4->quant.int4_packed);
  EXPECT_EQ(m4->quant.int4_group, 48);
  ASSERT_EQ(m4->trunk.size(), m32->trunk.size());
  std::vector<std::string> names;
  for (size_t i = 0; i < m4->trunk.size(); ++i) {
    EXPECT_EQ(m4->trunk[i].source, m32->trunk[i].source);
    EXPECT_EQ(m4->trunk[i].target, m32->trunk[i].target);
    names.push_back(m4->trunk[i].source);
  }
  for (int l : m4->moe_layers) {
    for (int e = 0; e < m4->n_experts; ++e) {
      for (int k = 0; k < 3; ++k) names.push_back(m4->ExpertTensor(l, e, k));
    }
  }
  int packed = 0;
  for (const std::string& name : names) {
    auto a = convert::LoadF32(**ck4, name, m4->quant);
    auto b = convert::LoadF32(**ck32, name, m32->quant);
    ASSERT_TRUE(a) << a.error().message();
    ASSERT_TRUE(b) << b.error().message();
    ASSERT_EQ(a->shape, b->shape) << name;
    ASSERT_EQ(a->values.size(), b->values.size()) << name;
    EXPECT_EQ(std::memcmp(a->values.data(), b->values.data(), a->values.size() * 4), 0) << name;
    packed += (*ck4)->Has(name + "_packed") ? 1 : 0;
  }
  EXPECT_EQ(packed, 3 * 8 * 3 + 3 * 3);  // every routed expert and every shared expert matrix

  ASSERT_TRUE(ConvertNow(src, dir / "out-int4", 2));
  ASSERT_TRUE(ConvertNow(f32, dir / "out-f32", 2));
  for (const std::string& f : kFiles) {
    if (f == "convert.json") continue;  // fingerprints its source
    EXPECT_TRUE(Slurp(dir / ("out-int4/" + f)) == Slurp(dir / ("out-f32/" + f))) << f << " differs";
  }
  ExpectSound(dir / "out-int4", src, 0.25);
}
#endif

// The release's layout (groups of 32): converts, verifies against its int4
// source, and the converted model generates.
TEST(ConvertE2E, Int4CheckpointConvertsVerifiesAndRuns) {
  TempDir dir;
  const std::string src = MakeInt4Checkpoint(dir, 32, false, true);
  auto rep = ConvertNow(src, dir / "out", 2);
  ASSERT_TRUE(rep) << rep.error().message();
  EXPECT_TRUE(rep->complete);
  EXPECT_EQ(rep->family, "deepseek-v3");
  ExpectSound(dir / "out", src, 0.25);
#ifdef WASTE_CLI_BINARY
  test::ProcessResult p =
      test::RunProcess({WASTE_CLI_BINARY, "run", dir / "out", "hello world", "-n", "8", "--json"});
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const nlohmann::json j = nlohmann::json::parse(p.out);
  EXPECT_GE(j.value("tokens", 0), 1) << p.out;  // fewer than 8 only when it ends the text
  EXPECT_TRUE(j.value("tokens", 0) == 8 || j.value("finish", "") == "eos") << p.out;
#endif
}

// What the int4 reader cannot decode is refused with the name of the key or
// the tensor: a scheme other than symmetric int4 groups before any work, a
// missing companion when the checkpoint is described, a shape that
// disagrees when the matrix is read.
TEST(ConvertE2E, Int4SourcesItCannotReadAreRefusedWithTheirNames) {
  TempDir dir;
  const std::string src = MakeInt4Checkpoint(dir, 32, false, false);
  const std::string config = Slurp(src + "/config.json");
  auto with_weights = [&](const char* patch) {
    nlohmann::ordered_json c = nlohmann::ordered_json::parse(config);
    c["quantization_config"]["config_groups"]["group_0"]["weights"].merge_patch(nlohmann::json::parse(patch));
    std::ofstream(src + "/config.json") << c.dump(2);
  };
  int n = 0;
  for (auto [patch, says] : {std::pair{R"({"symmetric": false})", "weights.symmetric is false"},
                             std::pair{R"({"num_bits": 8})", "weights.num_bits is 8"},
                             std::pair{R"({"strategy": "channel"})", "weights.strategy is \"channel\""},
                             std::pair{R"({"group_size": null})", "weights has no group_size"}}) {
    SCOPED_TRACE(patch);
    with_weights(patch);
    const std::string out = dir / ("out" + std::to_string(n++));
    auto r = ConvertNow(src, out, 2);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message().find(says), std::string::npos) << r.error().message();
    EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(out) / "parts"));  // before any work
  }
  // Scales written for groups of 32 read as groups of 64: the first expert
  // matrix read names itself and both shapes.
  with_weights(R"({"group_size": 64})");
  auto r = ConvertNow(src, dir / "out-group", 2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("weight_scale: shape [64, 4], a [64, 128] matrix in groups of 64 columns "
                                     "needs [64, 2]"),
            std::string::npos)
      << r.error().message();
  std::ofstream(src + "/config.json") << config;

  // A scale dropped from the index: found when the checkpoint is described.
  const std::string index_path = src + "/model.safetensors.index.json";
  const std::string index_text = Slurp(index_path);
  {
    nlohmann::json index = nlohmann::json::parse(index_text);
    ASSERT_EQ(index["weight_map"].erase("model.layers.2.mlp.experts.5.up_proj.weight_scale"), 1u);
    std::ofstream(index_path) << index.dump();
  }
  r = ConvertNow(src, dir / "out-scale", 2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("tensor model.layers.2.mlp.experts.5.up_proj.weight_packed has no "
                                     "model.layers.2.mlp.experts.5.up_proj.weight_scale beside it"),
            std::string::npos)
      << r.error().message();
  EXPECT_FALSE(std::filesystem::exists(dir / "out-scale/parts"));
  std::ofstream(index_path) << index_text;

  // A W_shape whose column count needs more words than are packed.
  {
    auto ck = convert::Checkpoint::Open(src);
    ASSERT_TRUE(ck);
    const convert::TensorEntry* t = (*ck)->Find("model.layers.3.mlp.experts.7.down_proj.weight_shape");
    ASSERT_NE(t, nullptr);
    ASSERT_EQ(t->dtype, convert::DType::kI64);
    std::fstream f((*ck)->ShardPath(*t), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(t->begin + 8));
    const int64_t cols = 72;  // 9 words; 64 columns are packed in 8
    f.write(reinterpret_cast<const char*>(&cols), 8);
  }
  r = ConvertNow(src, dir / "out-shape", 2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("tensor model.layers.3.mlp.experts.7.down_proj.weight_packed: packed shape "
                                     "[128, 8], a [128, 72] matrix"),
            std::string::npos)
      << r.error().message();
}

// Converter and engine agree on every family: a checkpoint in the family's
// published layout (from its generator preset) is described as that family,
// and the manifest config the converter writes reads back as it.
TEST(ConvertE2E, EveryFamilyConvertsAsItself) {
  int families = 0;
  ForEachFamily([&](const Family& f) {
    if (f.architectures.empty()) return;  // the fallback: nothing to convert
    SCOPED_TRACE(std::string(f.key));
    ASSERT_FALSE(f.generator_preset.empty());
    ++families;
    TempDir dir;
    const std::string src = MakeCheckpoint(dir, std::string(f.generator_preset),
                                           gen::CheckpointDType::kBf16, false, "", 256);
    auto ckpt = convert::Checkpoint::Open(src);
    ASSERT_TRUE(ckpt) << ckpt.error().message();
    auto model = convert::DescribeSource(**ckpt);
    ASSERT_TRUE(model) << model.error().message();
    EXPECT_EQ(model->family, &f);
    nlohmann::ordered_json head = {{"format_version", 0}, {"tensor_prefix", model->prefix},
                                   {"config", model->config}};
    auto m = ParseManifestConfig(head.dump(), "converted");
    ASSERT_TRUE(m) << m.error().message();
    EXPECT_EQ(m->config.arch, f.key);
  });
  EXPECT_GE(families, 4);
}

// DeepSeek-V2 converts and runs its own routing (softmax scores, groups
// scored by their best expert, no router bias); the one V2 setting the
// engine would run differently is refused before any work.
TEST(ConvertE2E, DeepSeekV2ConvertsAndItsUnsupportedScalingIsRefused) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "deepseek-v2-tiny", gen::CheckpointDType::kFp8, false);
  auto rep = ConvertNow(src, dir / "out", 2);
  ASSERT_TRUE(rep) << rep.error().message();
  EXPECT_TRUE(rep->complete);
  EXPECT_EQ(rep->family, "deepseek-v2");
  auto c = Container::Open(dir / "out");
  ASSERT_TRUE(c) << c.error().message();
  const MoeConfig& moe = (*c)->config().moe;
  EXPECT_EQ(moe.score, RouterScore::kSoftmax);
  EXPECT_EQ(moe.route_scope, RouteScope::kGroupLimited);
  EXPECT_EQ(moe.group_score, GroupScore::kMax);
  EXPECT_FALSE(moe.renormalize);
  ExpectSound(dir / "out", src, 0.25);
#ifdef WASTE_CLI_BINARY
  test::ProcessResult p = test::RunProcess({WASTE_CLI_BINARY, "eval", dir / "out", "--ids", "1 2 3"});
  EXPECT_EQ(p.exit_code, 0) << p.err;
#endif

  TempDir dir2;
  const std::string src2 = MakeCheckpoint(dir2, "deepseek-v2-tiny", gen::CheckpointDType::kBf16, false,
                                          R"({"norm_topk_prob": true})");
  auto r = ConvertNow(src2, dir2 / "out", 2);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code(), Errc::kUnsupported);
  EXPECT_NE(r.error().message().find("norm_topk_prob true and routed_scaling_factor 2.5"),
            std::string::npos)
      << r.error().message();
  EXPECT_FALSE(std::filesystem::exists(std::filesystem::path(dir2 / "out") / "parts"));  // refused before any work
}

TEST(ConvertE2E, MalformedSourcesAreRefusedWithTheirNames) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, false);
  // An expert tensor dropped from the index (still in its shard: invisible).
  {
    nlohmann::json index = nlohmann::json::parse(Slurp(src + "/model.safetensors.index.json"));
    ASSERT_EQ(index["weight_map"].erase("model.layers.2.block_sparse_moe.experts.5.w3.weight"), 1u);
    std::ofstream(src + "/model.safetensors.index.json") << index.dump();
  }
  auto r = ConvertNow(src, dir / "out", 2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message().find("experts.5.w3.weight is missing"), std::string::npos) << r.error().message();
  // A truncated shard.
  TempDir dir2;
  const std::string src2 = MakeCheckpoint(dir2, "tiny", gen::CheckpointDType::kBf16, false);
  const std::string shard = src2 + "/model-00002-of-00003.safetensors";
  std::filesystem::resize_file(shard, std::filesystem::file_size(shard) - 100);
  auto r2 = ConvertNow(src2, dir2 / "out", 2);
  ASSERT_FALSE(r2);
  EXPECT_NE(r2.error().message().find("model-00002-of-00003.safetensors"), std::string::npos);
  // Other settings into the same directory.
  TempDir dir3;
  const std::string src3 = MakeCheckpoint(dir3, "tiny", gen::CheckpointDType::kBf16, false);
  ASSERT_TRUE(ConvertNow(src3, dir3 / "out", 2));
  ConvertOptions o;
  o.source_dir = src3;
  o.out_dir = dir3 / "out";
  o.expert_format = "vq2r";
  auto r3 = Convert(o);
  ASSERT_FALSE(r3);
  EXPECT_NE(r3.error().message().find("other settings"), std::string::npos);
  // A norm gain that is not finite (folded into its readers by the residual
  // rotation, so checked before any of them is written).
  TempDir dir4;
  const std::string src4 = MakeCheckpoint(dir4, "tiny", gen::CheckpointDType::kBf16, false);
  const std::string gain = "model.layers.1.post_attention_layernorm.weight";
  {
    auto ck = convert::Checkpoint::Open(src4);
    ASSERT_TRUE(ck);
    const convert::TensorEntry* t = (*ck)->Find(gain);
    ASSERT_NE(t, nullptr);
    std::fstream f((*ck)->ShardPath(*t), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(t->begin + 6));
    const char nan_bf16[2] = {static_cast<char>(0xC0), static_cast<char>(0x7F)};
    f.write(nan_bf16, 2);
  }
  auto r4 = ConvertNow(src4, dir4 / "out", 2);
  ASSERT_FALSE(r4);
  EXPECT_NE(r4.error().message().find(gain + " holds a value that is not finite"), std::string::npos)
      << r4.error().message();
}

TEST(ConvertE2E, Vq2rAndVq4pConvert) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, false);
  for (const char* f : {"vq2r", "vq4p"}) {
    ConvertOptions o;
    o.source_dir = src;
    o.out_dir = dir / f;
    o.expert_format = f;
    o.threads = 2;
    auto r = Convert(o);
    ASSERT_TRUE(r) << r.error().message();
    ExpectSound(dir / f, src, std::string(f) == "vq2r" ? 0.40 : 0.26);
  }
}

// --tensor-format: rules choose the storage of the matrices they name (the
// first match wins), the container opens and is sound, the rules are part of
// the resume settings, and a rule that can never apply is refused before any
// work.
TEST(ConvertE2E, TensorFormatRulesChooseTheStorageAndUselessRulesAreRefused) {
  TempDir dir;
  // intermediate 512: the dense MLP's matrices (512 x 128) are quantised.
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, false,
                                         R"({"intermediate_size":512})");
  auto with_rules = [&](const std::string& out, std::vector<TensorFormatRule> rules) {
    ConvertOptions o;
    o.source_dir = src;
    o.out_dir = out;
    o.threads = 2;
    o.seed = 3;
    o.tensor_formats = std::move(rules);
    return Convert(o);
  };
  auto r = with_rules(dir / "out", {{"mlp.down_proj", "f32"}, {"mlp.", "q8g"}, {"lm_head", "q4g"}});
  ASSERT_TRUE(r) << r.error().message();
  std::map<std::string, int> fmt;
  const nlohmann::json manifest = nlohmann::json::parse(Slurp(dir / "out/manifest.json"));
  for (const auto& t : manifest["trunk"]) {
    fmt[t["name"].get<std::string>()] = t["fmt"].get<int>();
  }
  EXPECT_EQ(fmt["model.layers.0.mlp.down_proj.weight"], 0);  // F32: the first rule
  EXPECT_EQ(fmt["model.layers.0.mlp.gate_proj.weight"], 2);  // Q8G
  EXPECT_EQ(fmt["model.layers.0.mlp.up_proj.weight"], 2);
  EXPECT_EQ(fmt["lm_head.weight"], 3);                       // Q4G
  EXPECT_EQ(fmt["model.embed_tokens.weight"], 2);            // the default, Q8G
  EXPECT_EQ(fmt["model.layers.0.input_layernorm.weight"], 0);
  ExpectSound(dir / "out", src, 0.23, 0.2);  // the head at Q4G: ~17 % on heavy tails
  // Without rules the same layer-0 matrices are Q4G: the rules did it.
  ASSERT_TRUE(ConvertNow(src, dir / "plain", 2));
  EXPECT_NE(Slurp(dir / "plain/trunk.bin"), Slurp(dir / "out/trunk.bin"));
  EXPECT_EQ(Slurp(dir / "plain/experts-L1.bin"), Slurp(dir / "out/experts-L1.bin"));  // experts untouched
  // A conversion without rules records no rules, so one started before they
  // existed still resumes.
  EXPECT_FALSE(nlohmann::json::parse(Slurp(dir / "plain/convert.json"))["settings"].contains("tensor_formats"));

  // Other rules into the same directory: refused, nothing redone.
  auto again = with_rules(dir / "out", {{"mlp.", "q8g"}});
  ASSERT_FALSE(again);
  EXPECT_NE(again.error().message().find("other settings"), std::string::npos) << again.error().message();
  // Rules that cannot apply, each refused with its text before any work.
  struct Bad {
    TensorFormatRule rule;
    const char* says;
  };
  for (const Bad& b : {Bad{{"mlp.", "q5g"}, "must be f32, q8g or q4g"}, Bad{{"", "q8g"}, "pattern is empty"},
                       Bad{{"no_such_tensor", "q8g"}, "matches no quantised trunk matrix"},
                       Bad{{"input_layernorm", "q8g"}, "matches no quantised trunk matrix"}}) {
    auto e = with_rules(dir / "bad", {b.rule});
    ASSERT_FALSE(e) << b.rule.pattern;
    EXPECT_NE(e.error().message().find(b.says), std::string::npos) << e.error().message();
  }
  auto shadowed = with_rules(dir / "bad", {{"mlp.", "q8g"}, {"mlp.down_proj", "f32"}});
  ASSERT_FALSE(shadowed);
  EXPECT_NE(shadowed.error().message().find("taken by an earlier rule"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "bad/trunk.bin"));
#ifdef WASTE_CLI_BINARY
  test::ProcessResult p = test::RunProcess({WASTE_CLI_BINARY, "convert", src, dir / "cli", "--tensor-format",
                                            "mlp.", "--threads", "1"});
  EXPECT_EQ(p.exit_code, 2);
  EXPECT_NE(p.err.find("is not PART=FORMAT"), std::string::npos) << p.err;
  p = test::RunProcess({WASTE_CLI_BINARY, "convert", src, dir / "cli", "--tensor-format", "mlp.=q8g",
                        "--tensor-format", "lm_head=q4g", "--threads", "1"});
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(nlohmann::json::parse(Slurp(dir / "cli/convert.json"))["settings"]["tensor_formats"],
            nlohmann::json::parse(R"([["mlp.","q8g"],["lm_head","q4g"]])"));
#endif
}

// The residual rotation (docs/CONVERT.md) changes the basis, not the model.
// With every trunk matrix kept F32 the checks are exact up to float
// rounding, and they hold for any orthonormal basis, so they do not restate
// how the converter builds its own: each product of a matrix that reads the
// stream and one that writes it equals the source's with the reader's norm
// gain folded in (the same basis on both sides, orthonormal), the head times
// the embedding likewise, the norm gains are ones, and waste verify
// --source compares in the rotated basis. --no-rotate stores the source's
// values as they are.
namespace rotation {

struct Matrix {
  int64_t rows = 0, cols = 0;
  std::vector<double> v;
};

// A trunk tensor the rules kept F32, as the container holds it.
Matrix TrunkF32(const Container& c, const std::string& name) {
  const TensorView* t = c.Find(name);
  if (t == nullptr || t->fmt != TensorFmt::kF32 || t->f32() == nullptr) {
    ADD_FAILURE() << "no resident F32 trunk tensor " << name;
    return {};
  }
  return Matrix{t->rows, t->cols, std::vector<double>(t->f32(), t->f32() + t->elements())};
}

Matrix Source(const convert::Checkpoint& ck, const convert::SourceModel& sm, const std::string& name) {
  auto t = convert::LoadF32(ck, name, sm.quant);
  EXPECT_TRUE(t) << name;
  if (!t) return {};
  return Matrix{t->rows(), t->cols(), std::vector<double>(t->values.begin(), t->values.end())};
}

// a · diag(gain) · bᵀ when `b_transposed`, else a · diag(gain) · b.
Matrix Product(const Matrix& a, const std::vector<double>& gain, const Matrix& b, bool b_transposed) {
  const int64_t k = a.cols, n = b_transposed ? b.rows : b.cols;
  EXPECT_EQ(k, b_transposed ? b.cols : b.rows);
  Matrix out{a.rows, n, std::vector<double>(static_cast<size_t>(a.rows * n), 0.0)};
  for (int64_t i = 0; i < a.rows; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t x = 0; x < k; ++x) {
        const double bv = b_transposed ? b.v[static_cast<size_t>(j * b.cols + x)] : b.v[static_cast<size_t>(x * b.cols + j)];
        s += a.v[static_cast<size_t>(i * k + x)] * (gain.empty() ? 1.0 : gain[static_cast<size_t>(x)]) * bv;
      }
      out.v[static_cast<size_t>(i * n + j)] = s;
    }
  }
  return out;
}

// Relative Frobenius distance.
double Distance(const Matrix& a, const Matrix& b) {
  double d = 0, n = 0;
  for (size_t i = 0; i < a.v.size() && i < b.v.size(); ++i) {
    d += (a.v[i] - b.v[i]) * (a.v[i] - b.v[i]);
    n += b.v[i] * b.v[i];
  }
  EXPECT_EQ(a.v.size(), b.v.size());
  return std::sqrt(d / n);
}

}  // namespace rotation

TEST(ConvertE2E, RotationChangesTheBasisNotTheModel) {
  using rotation::Matrix;
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, false,
                                         R"({"intermediate_size":512})");
  ConvertOptions o;
  o.source_dir = src;
  o.threads = 2;
  o.seed = 3;
  o.tensor_formats = {{"mlp.", "f32"}, {"embed_tokens", "f32"}, {"lm_head", "f32"}};
  o.out_dir = dir / "rot";
  auto rot = Convert(o);
  ASSERT_TRUE(rot) << rot.error().message();
  EXPECT_EQ(rot->rotation_block, 128);  // the tiny preset's hidden size
  EXPECT_EQ(rot->rotation_skipped, "");
  o.out_dir = dir / "plain";
  o.rotate_residual = false;
  auto plain = Convert(o);
  ASSERT_TRUE(plain) << plain.error().message();
  EXPECT_EQ(plain->rotation_block, 0);

  auto ck = convert::Checkpoint::Open(src);
  ASSERT_TRUE(ck);
  auto sm = convert::DescribeSource(**ck);
  ASSERT_TRUE(sm);
  auto crot = Container::Open(dir / "rot");
  auto cplain = Container::Open(dir / "plain");
  ASSERT_TRUE(crot && cplain);
  EXPECT_TRUE(nlohmann::json::parse(Slurp(dir / "rot/manifest.json")).contains("residual_basis"));
  EXPECT_FALSE(nlohmann::json::parse(Slurp(dir / "plain/manifest.json")).contains("residual_basis"));
  auto stored = [&](const std::string& name) { return rotation::TrunkF32(**crot, name); };
  auto source = [&](const std::string& name) { return rotation::Source(**ck, *sm, name); };
  auto gain = [&](const std::string& name) { return source(name).v; };

  // --no-rotate: every trunk tensor as the source has it.
  for (const TensorInfo& t : (*cplain)->trunk_index()) {
    EXPECT_EQ(rotation::Distance(rotation::TrunkF32(**cplain, t.name), source(t.name)), 0.0)
        << t.name;
  }
  // Norm gains over the stream are ones; the others are untouched.
  for (const TensorInfo& t : (*crot)->trunk_index()) {
    const Matrix m = stored(t.name);
    const bool stream_gain = t.name == "model.norm.weight" || t.name.ends_with("input_layernorm.weight") ||
                             t.name.ends_with("post_attention_layernorm.weight");
    if (stream_gain) {
      for (double v : m.v) EXPECT_EQ(v, 1.0) << t.name;
    } else if (t.name.find("norm") != std::string::npos || t.name.find("conv1d") != std::string::npos) {
      EXPECT_EQ(rotation::Distance(m, source(t.name)), 0.0) << t.name;
    }
  }
  struct Pair {
    std::string reader, norm, writer;
  };
  std::vector<Pair> pairs = {
      {"model.layers.0.self_attn.q_proj.weight", "model.layers.0.input_layernorm.weight",
       "model.layers.0.self_attn.o_proj.weight"},
      {"model.layers.0.mlp.gate_proj.weight", "model.layers.0.post_attention_layernorm.weight",
       "model.layers.0.mlp.down_proj.weight"},
      {"model.layers.0.self_attn.b_proj.weight", "model.layers.0.input_layernorm.weight",
       "model.layers.0.mlp.down_proj.weight"},
      {"model.layers.1.block_sparse_moe.gate.weight", "model.layers.1.post_attention_layernorm.weight",
       "model.layers.1.block_sparse_moe.shared_experts.down_proj.weight"},
      {"model.layers.1.block_sparse_moe.shared_experts.up_proj.weight",
       "model.layers.1.post_attention_layernorm.weight", "model.layers.3.self_attn.o_proj.weight"},
      {"model.layers.2.self_attn.kv_a_proj_with_mqa.weight", "model.layers.2.input_layernorm.weight",
       "model.layers.2.self_attn.o_proj.weight"},
      {"model.layers.3.self_attn.g_a_proj.weight", "model.layers.3.input_layernorm.weight",
       "model.layers.0.self_attn.o_proj.weight"},
  };
  for (const Pair& p : pairs) {
    const Matrix want = rotation::Product(source(p.reader), gain(p.norm), source(p.writer), false);
    const Matrix got = rotation::Product(stored(p.reader), {}, stored(p.writer), false);
    EXPECT_LT(rotation::Distance(got, want), 1e-5) << p.reader << " x " << p.writer;
    // And the basis did change: the reader alone is not the source's.
    EXPECT_GT(rotation::Distance(stored(p.reader), source(p.reader)), 0.1) << p.reader;
  }
  // The embedding's rows are stream vectors (Gram matrix kept), and the
  // head reads them through the final norm.
  EXPECT_LT(rotation::Distance(rotation::Product(stored("model.embed_tokens.weight"), {},
                                                 stored("model.embed_tokens.weight"), true),
                               rotation::Product(source("model.embed_tokens.weight"), {},
                                                 source("model.embed_tokens.weight"), true)),
            1e-5);
  EXPECT_LT(rotation::Distance(rotation::Product(stored("lm_head.weight"), {}, stored("model.embed_tokens.weight"), true),
                               rotation::Product(source("lm_head.weight"), gain("model.norm.weight"),
                                                 source("model.embed_tokens.weight"), true)),
            1e-5);
  // verify --source puts the source into the same basis: the F32 trunk is exact.
  ExpectSound(dir / "rot", src, 0.23, 1e-5);
  {
    VerifyOptions v;
    v.container_dir = dir / "rot";
    v.source_dir = src;
    auto r = Verify(v);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->rotation_block, 128);
    v.container_dir = dir / "plain";
    r = Verify(v);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->rotation_block, 0);
  }
#ifdef WASTE_CLI_BINARY
  // The CLI's --no-rotate is the option: the same bytes; and a default run
  // over that unrotated conversion refuses it, saying how to resume.
  const std::vector<std::string> rules = {"--tensor-format", "mlp.=f32", "--tensor-format", "embed_tokens=f32",
                                          "--tensor-format", "lm_head=f32"};
  std::vector<std::string> argv = {WASTE_CLI_BINARY, "convert", src, dir / "cli", "--threads", "2", "--seed", "3",
                                   "--no-rotate", "--json"};
  argv.insert(argv.end(), rules.begin(), rules.end());
  test::ProcessResult cli = test::RunProcess(argv);
  ASSERT_EQ(cli.exit_code, 0) << cli.err;
  EXPECT_NE(cli.out.find("\"rotation_block\":0"), std::string::npos) << cli.out;
  EXPECT_EQ(Slurp(dir / "cli/trunk.bin"), Slurp(dir / "plain/trunk.bin"));
  EXPECT_EQ(Slurp(dir / "cli/experts-L1.bin"), Slurp(dir / "plain/experts-L1.bin"));
  argv.erase(std::find(argv.begin(), argv.end(), "--no-rotate"));
  cli = test::RunProcess(argv);
  EXPECT_NE(cli.exit_code, 0);
  EXPECT_NE(cli.err.find("add --no-rotate to resume it"), std::string::npos) << cli.err;
#endif
  // A manifest whose recorded basis the source cannot give is not sound.
  nlohmann::json m = nlohmann::json::parse(Slurp(dir / "rot/manifest.json"));
  m["residual_basis"]["block"] = 64;
  std::ofstream(dir / "rot/manifest.json") << m.dump(1);
  VerifyOptions v;
  v.container_dir = dir / "rot";
  v.source_dir = src;
  auto bad = Verify(v);
  ASSERT_TRUE(bad) << bad.error().message();
  EXPECT_FALSE(bad->sound);
  ASSERT_FALSE(bad->problems.empty());
  EXPECT_NE(bad->problems[0].find("residual_basis block 64"), std::string::npos) << bad->problems[0];
}

// The float model (numpy oracle, straight from the checkpoint) against the
// converted container (same oracle): KL divergence and top-1 agreement over
// a prompt, for our recipe and for the reference's recipe at the same size.
#if defined(WASTE_CLI_BINARY) && defined(WASTE_PYTHON)
namespace oracle_kl {

std::vector<float> Logits(const std::string& dir, bool checkpoint, const std::string& tmp, bool* ok) {
  std::vector<std::string> argv = {WASTE_PYTHON, std::string(WASTE_SOURCE_DIR) + "/tools/oracle/oracle.py", dir,
                                   "--ids", "3 40 77 114 151 188 225 262 299 336 373 410 447 484 521 558 595 632 669 706 743 780 817 854 891 928 965",
                                   "--all-logits-out", tmp, "--quiet"};
  if (checkpoint) argv.push_back("--checkpoint");
  test::ProcessResult r = test::RunProcess(argv, {}, 300);
  *ok = r.exit_code == 0;
  if (!*ok) ADD_FAILURE() << r.err;
  std::string bytes = Slurp(tmp);
  std::vector<float> v(bytes.size() / 4);
  std::memcpy(v.data(), bytes.data(), v.size() * 4);
  return v;
}

// Mean KL(float || converted) in nats and the top-1 agreement.
std::pair<double, double> Compare(const std::vector<float>& f, const std::vector<float>& q, size_t vocab) {
  const size_t t = f.size() / vocab;
  double kl = 0;
  int agree = 0;
  for (size_t i = 0; i < t; ++i) {
    const float* a = f.data() + i * vocab;
    const float* b = q.data() + i * vocab;
    double ma = a[0], mb = b[0];
    size_t ia = 0, ib = 0;
    for (size_t j = 0; j < vocab; ++j) {
      if (a[j] > ma) ma = a[j], ia = j;
      if (b[j] > mb) mb = b[j], ib = j;
    }
    double za = 0, zb = 0;
    for (size_t j = 0; j < vocab; ++j) za += std::exp(a[j] - ma), zb += std::exp(b[j] - mb);
    for (size_t j = 0; j < vocab; ++j) {
      const double la = a[j] - ma - std::log(za), lb = b[j] - mb - std::log(zb);
      kl += std::exp(la) * (la - lb);
    }
    agree += ia == ib;
  }
  return {kl / t, static_cast<double>(agree) / t};
}

// KL(float || container) and top-1 agreement of each container against the
// checkpoint's float forward; empty after a failure (already reported).
std::vector<std::pair<double, double>> AgainstFloat(const std::string& src,
                                                    const std::vector<std::string>& containers,
                                                    const std::string& tmp) {
  auto c = Container::Open(containers.at(0));
  if (!c) {
    ADD_FAILURE() << c.error().message();
    return {};
  }
  const size_t vocab = static_cast<size_t>((*c)->config().vocab);
  bool ok = false;
  const std::vector<float> f = Logits(src, true, tmp + "/float.f32", &ok);
  if (!ok) return {};
  std::vector<std::pair<double, double>> out;
  for (const std::string& d : containers) {
    const std::vector<float> q = Logits(d, false, tmp + "/q.f32", &ok);
    if (!ok || q.size() != f.size()) {
      ADD_FAILURE() << d << ": " << q.size() << " logits, the float model " << f.size();
      return {};
    }
    out.push_back(Compare(f, q, vocab));
  }
  return out;
}

}  // namespace oracle_kl

TEST(ConvertE2E, CloserToTheFloatModelThanTheReferenceRecipe) {
  if (!std::filesystem::exists(WASTE_PYTHON)) GTEST_SKIP() << WASTE_PYTHON << " not found";
  if (test::RunProcess({WASTE_PYTHON, "-c", "import numpy"}).exit_code != 0) {
    GTEST_SKIP() << "numpy is not available to " << WASTE_PYTHON;
  }
  // 32 experts (the reference trains on 12 of them) and a dense MLP big
  // enough for Q4G. WASTE_TEST_MODEL_SEED (read only here) draws another
  // random model, to measure how the comparison holds across models.
  const char* seed_env = std::getenv("WASTE_TEST_MODEL_SEED");
  const uint64_t model_seed = seed_env != nullptr && *seed_env != 0 ? std::strtoull(seed_env, nullptr, 10) : 5;
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, false,
                                         R"({"num_experts": 32, "intermediate_size": 512})", 1024, model_seed);
  ConvertOptions o;
  o.source_dir = src;
  o.out_dir = dir / "ours";
  o.threads = 2;
  o.seed = 3;
  o.train_vectors = 65536;
  auto ours = Convert(o);
  ASSERT_TRUE(ours);
  o.out_dir = dir / "ref";
  o.reference_recipe = true;
  o.train_vectors = 300000;
  auto ref = Convert(o);
  ASSERT_TRUE(ref);
  // Expert reconstruction error, every layer and kind: lower at the same size.
  double err_ours = 0, err_ref = 0;
  for (size_t i = 0; i < ours->layers.size(); ++i) {
    for (int k = 0; k < 3; ++k) err_ours += ours->layers[i].rel_error[k], err_ref += ref->layers[i].rel_error[k];
  }
  std::printf("expert error: ours %.2f%%, reference recipe %.2f%%; trunk ours %.2f%%, reference %.2f%%\n",
              100 * err_ours / 9, 100 * err_ref / 9, 100 * ours->trunk_rel_error, 100 * ref->trunk_rel_error);
  EXPECT_LT(err_ours, 0.97 * err_ref);
  EXPECT_LT(ours->trunk_rel_error, ref->trunk_rel_error);
  const auto kl = oracle_kl::AgainstFloat(src, {dir / "ours", dir / "ref"}, dir.path());
  ASSERT_EQ(kl.size(), 2u);
  const auto [kl_ours, top1_ours] = kl[0];
  const auto [kl_ref, top1_ref] = kl[1];
  std::printf("model seed %llu: KL to the float model: ours %.4f nats (top-1 %.0f%%), reference recipe %.4f "
              "(top-1 %.0f%%), ratio %.3f\n",
              static_cast<unsigned long long>(model_seed), kl_ours, 100 * top1_ours, kl_ref, 100 * top1_ref,
              kl_ref > 0 ? kl_ours / kl_ref : 0.0);
  // 27 positions of a random model: KL is noisy, so the bounds are loose.
  // The issue's goal is 0.8x; this model measures 0.76x (0.59-0.81 on four
  // other model seeds), nearly all of it from the residual rotation.
  EXPECT_LT(kl_ours, 0.5);
  EXPECT_LT(kl_ours, 0.85 * kl_ref);
  // Same container size.
  EXPECT_EQ(std::filesystem::file_size(dir / "ours/trunk.bin"), std::filesystem::file_size(dir / "ref/trunk.bin"));
  EXPECT_EQ(std::filesystem::file_size(dir / "ours/experts-L1.bin"),
            std::filesystem::file_size(dir / "ref/experts-L1.bin"));
}

// The rotation is the same model in every family's forward pass: MLA with
// a low-rank query (DeepSeek-V3), and K3's attention residuals (their
// mixing vectors read the stream through their own gains) and latent
// experts (which never see the stream, so their records do not change).
// A tensor left in the old basis would put the converted model nats away
// from the float one; rotated, it is as close as unrotated or closer.
TEST(ConvertE2E, RotatedFamiliesStayAsCloseToTheFloatModel) {
  if (!std::filesystem::exists(WASTE_PYTHON)) GTEST_SKIP() << WASTE_PYTHON << " not found";
  if (test::RunProcess({WASTE_PYTHON, "-c", "import numpy"}).exit_code != 0) {
    GTEST_SKIP() << "numpy is not available to " << WASTE_PYTHON;
  }
  for (const char* preset : {"deepseek-v3-tiny", "k3-tiny"}) {
    TempDir dir;
    const std::string src = MakeCheckpoint(dir, preset, gen::CheckpointDType::kBf16, false, "", 1024);
    ConvertOptions o;
    o.source_dir = src;
    o.threads = 2;
    o.seed = 3;
    o.out_dir = dir / "rot";
    auto rot = Convert(o);
    ASSERT_TRUE(rot) << preset << ": " << rot.error().message();
    EXPECT_GT(rot->rotation_block, 0) << preset;
    o.out_dir = dir / "plain";
    o.rotate_residual = false;
    auto plain = Convert(o);
    ASSERT_TRUE(plain) << preset << ": " << plain.error().message();
    const auto kl = oracle_kl::AgainstFloat(src, {dir / "rot", dir / "plain"}, dir.path());
    ASSERT_EQ(kl.size(), 2u) << preset;
    const auto [kl_rot, top1_rot] = kl[0];
    const auto [kl_plain, top1_plain] = kl[1];
    std::printf("%s: KL to the float model rotated %.4f (top-1 %.0f%%), not rotated %.4f (top-1 %.0f%%)\n", preset,
                kl_rot, 100 * top1_rot, kl_plain, 100 * top1_plain);
    EXPECT_LT(kl_rot, 1.25 * kl_plain) << preset;
    ExpectSound(dir / "rot", src, 0.25);
  }
}

// Formats chosen by --tensor-format in places the default recipe never puts
// them (an F32 dense MLP, a Q4G head, a Q4G embedding read from disk row by
// row): the engine's logits equal the numpy oracle's on the same container.
TEST(ConvertE2E, EngineReadsRuleChosenFormatsAsTheOracleDoes) {
  if (!std::filesystem::exists(WASTE_PYTHON)) GTEST_SKIP() << WASTE_PYTHON << " not found";
  if (test::RunProcess({WASTE_PYTHON, "-c", "import numpy"}).exit_code != 0) {
    GTEST_SKIP() << "numpy is not available to " << WASTE_PYTHON;
  }
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, false,
                                         R"({"intermediate_size":512})");
  for (const char* head : {"q4g", "f32"}) {
    const std::string out = dir / (std::string("out-") + head);
    ConvertOptions o;
    o.source_dir = src;
    o.out_dir = out;
    o.threads = 2;
    o.tensor_formats = {{"mlp.gate", "f32"}, {"mlp.", "q8g"}, {"lm_head", head},
                        {"embed_tokens", std::string(head) == "q4g" ? "f32" : "q4g"}};
    auto r = Convert(o);
    ASSERT_TRUE(r) << r.error().message();
    const std::string ids = "1 17 42 5 300 511 2";
    test::ProcessResult e = test::RunProcess({WASTE_CLI_BINARY, "eval", out, "--ids", ids, "--logits-out",
                                              out + "/engine.f32"});
    ASSERT_EQ(e.exit_code, 0) << e.err;
    test::ProcessResult p = test::RunProcess({WASTE_PYTHON, std::string(WASTE_SOURCE_DIR) + "/tools/oracle/oracle.py",
                                              out, "--ids", ids, "--logits-out", out + "/oracle.f32", "--quiet"},
                                             {}, 300);
    ASSERT_EQ(p.exit_code, 0) << p.err;
    test::ProcessResult c = test::RunProcess({WASTE_PYTHON, std::string(WASTE_SOURCE_DIR) + "/tools/oracle/compare.py",
                                              out + "/engine.f32", out + "/oracle.f32", "--rel", "1e-4"});
    EXPECT_EQ(c.exit_code, 0) << head << ": " << c.out << c.err;
  }
}
#endif

// --- What convert and verify refuse, and how they say it -----------------

// Every entry under `dir` with its bytes: what "nothing in it was touched"
// compares.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    const std::string rel = std::filesystem::relative(e.path(), dir).string();
    files[rel] = e.is_directory() ? "<dir>" : Slurp(e.path().string());
  }
  return files;
}

bool Has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// A mistyped OUT must never mix a container into unrelated files, nor
// overwrite the checkpoint's own tokenizer.model and chat template.
TEST(ConvertE2E, RefusesAnOutThatIsNotEmptyAndNotAConversionTouchingNothing) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, true);
  const std::string out = dir / "photos";
  std::filesystem::create_directories(out + "/2024");
  std::ofstream(out + "/notes.txt") << "keep me";
  std::ofstream(out + "/draft.tmp.1") << "named like a temporary, still not the converter's";
  std::map<std::string, std::string> before = Snapshot(out);
  auto r = ConvertNow(src, out, 2);
  ASSERT_FALSE(r);
  EXPECT_TRUE(Has(r.error().message(), out + " is not empty and not a conversion in progress"))
      << r.error().message();
  EXPECT_EQ(Snapshot(out), before);
  // A convert.json of someone else's: not taken for resume state.
  std::ofstream(out + "/convert.json") << R"({"input": "a.png", "output": "a.jpg"})";
  before = Snapshot(out);
  r = ConvertNow(src, out, 2);
  ASSERT_FALSE(r);
  EXPECT_TRUE(Has(r.error().message(), "is not waste convert's resume state"))
      << r.error().message();
  EXPECT_EQ(Snapshot(out), before);
  // A container this converter did not write.
  const std::string other = dir / "other";
  std::filesystem::create_directories(other);
  std::ofstream(other + "/manifest.json") << "{}";
  r = ConvertNow(src, other, 2);
  ASSERT_FALSE(r);
  EXPECT_TRUE(Has(r.error().message(), "holds a container that this converter did not write"));
  EXPECT_EQ(Snapshot(other).size(), 1u);
  // A file.
  std::ofstream(dir / "file") << "x";
  r = ConvertNow(src, dir / "file", 2);
  ASSERT_FALSE(r);
  EXPECT_TRUE(Has(r.error().message(), "is a file, not a directory")) << r.error().message();
  EXPECT_EQ(Slurp(dir / "file"), "x");
  // The checkpoint itself, under another spelling of its path.
  before = Snapshot(src);
  r = ConvertNow(src, src + "/.", 2);
  ASSERT_FALSE(r);
  EXPECT_TRUE(Has(r.error().message(), "is the checkpoint directory itself"))
      << r.error().message();
  EXPECT_EQ(Snapshot(src), before);
#ifdef WASTE_CLI_BINARY
  before = Snapshot(out);
  test::ProcessResult p =
      test::RunProcess({WASTE_CLI_BINARY, "convert", src, out, "--threads", "1"});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_TRUE(
      Has(p.err, "waste convert: " + out + " is not empty and not a conversion in progress"))
      << p.err;
  EXPECT_EQ(Snapshot(out), before);
#endif
}

// What a conversion leaves behind is recognised as one: a first run killed
// before its state was published, a subset run, a folder inside SRC.
TEST(ConvertE2E, ResumesIntoItsOwnDirectoriesOnly) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, false);
  const std::string early = dir / "early";
  std::filesystem::create_directories(early + "/parts");
  std::ofstream(early + "/convert.json.tmp.4242.0") << "{\"vers";
  auto r = ConvertNow(src, early, 2, {2});
  ASSERT_TRUE(r) << r.error().message();
  EXPECT_FALSE(std::filesystem::exists(early + "/convert.json.tmp.4242.0"));
  const std::string inside = src + "/waste";
  ASSERT_TRUE(ConvertNow(src, inside, 2, {2}));
  auto rest = ConvertNow(src, inside, 2);
  ASSERT_TRUE(rest) << rest.error().message();
  EXPECT_TRUE(rest->complete);
  for (const ConvertLayerReport& l : rest->layers) EXPECT_EQ(l.cached, l.layer == 2) << l.layer;
  ExpectSound(inside, src, 0.23);
}

TEST(ConvertE2E, ASourceThatIsNoCheckpointIsNamed) {
  TempDir dir;
  auto r = ConvertNow(dir / "nonexist", dir / "out", 2);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "no such directory: " + (dir / "nonexist"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
  std::filesystem::create_directories(dir / "container");
  std::ofstream(dir / "container/manifest.json") << "{}";
  r = ConvertNow(dir / "container", dir / "out", 2);
  ASSERT_FALSE(r);
  EXPECT_EQ(
      r.error().message(),
      (dir / "container") + " is a waste container already (manifest.json), not a checkpoint");
  std::filesystem::create_directories(dir / "empty");
  r = ConvertNow(dir / "empty", dir / "out", 2);
  ASSERT_FALSE(r);
  EXPECT_TRUE(
      Has(r.error().message(), "neither model.safetensors.index.json nor model.safetensors"));
  EXPECT_FALSE(std::filesystem::exists(dir / "out"));
#ifdef WASTE_CLI_BINARY
  test::ProcessResult p =
      test::RunProcess({WASTE_CLI_BINARY, "convert", dir / "nonexist", dir / "out"});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_TRUE(Has(p.err, "waste convert: no such directory: " + (dir / "nonexist"))) << p.err;
  p = test::RunProcess(
      {WASTE_CLI_BINARY, "verify", dir / "container", "--source", dir / "container"});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_TRUE(Has(p.err, "is a waste container already (manifest.json), not a checkpoint"))
      << p.err;
#endif
}

#ifdef WASTE_CLI_BINARY
// A value that is wrong in itself is a usage error (exit 2) naming the
// option and the value, found before anything is read or created.
TEST(ConvertE2E, CliOptionValuesThatMakeNoSenseAreUsageErrors) {
  TempDir dir;
  const std::string src = MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, false);
  const std::string out = dir / "out";
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases = {
      {{"--train-vectors", "0"}, "--train-vectors: 0 is not a vector count"},
      {{"--tensor-format", "x=q2"},
       "--tensor-format: \"x=q2\": the format must be f32, q8g or q4g"},
      {{"--tensor-format", "foo"}, "--tensor-format: \"foo\" is not PART=FORMAT"},
      {{"--tensor-format", "=q8g"}, "--tensor-format: \"=q8g\" has an empty PART"},
      {{"--threads", "-1"}, "--threads: -1 is not a thread count"},
      {{"--layers", "3-1"}, "--layers: \"3-1\" is a reversed range (write 1-3)"},
      {{"--layers", "1-2-3"}, "--layers: \"1-2-3\" is not a layer number or range"},
      {{"--layers", "2x"}, "--layers: \"2x\" is not a layer number or range"},
      {{"--layers", "1,,2"}, "--layers: \"\" is not a layer number or range"},
      {{"--expert-format", "vq9"}, "--expert-format"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {WASTE_CLI_BINARY, "convert", src, out};
    args.insert(args.end(), c.args.begin(), c.args.end());
    test::ProcessResult p = test::RunProcess(args);
    EXPECT_EQ(p.exit_code, 2) << c.args[0] << " " << c.args[1] << ": " << p.err;
    EXPECT_TRUE(Has(p.err, c.says)) << p.err;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.args[0] << " " << c.args[1];
  }
  test::ProcessResult v = test::RunProcess({WASTE_CLI_BINARY, "verify", out, "--threads", "-1"});
  EXPECT_EQ(v.exit_code, 2);
  EXPECT_TRUE(Has(v.err, "--threads: -1 is not a thread count")) << v.err;
  // Well-formed ranges still mean what they say (and --threads 0 is every CPU).
  test::ProcessResult ok =
      test::RunProcess({WASTE_CLI_BINARY, "convert", src, out, "--layers", "2-3,1-1", "--threads",
                        "0", "--train-vectors", "4096"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  const nlohmann::json state = nlohmann::json::parse(Slurp(out + "/convert.json"));
  EXPECT_EQ(state["layers"].size(), 3u);
  EXPECT_EQ(state["settings"]["train_vectors"], 4096);
}

TEST(ConvertE2E, CliVerifyNamesAPathThatIsNoContainer) {
  TempDir dir;
  const std::string missing = dir / "nonexist";
  for (bool json : {false, true}) {
    std::vector<std::string> args = {WASTE_CLI_BINARY, "verify", missing};
    if (json) args.push_back("--json");
    test::ProcessResult p = test::RunProcess(args);
    EXPECT_EQ(p.exit_code, 1);
    EXPECT_EQ(p.err, "waste verify: no such directory: " + missing + "\n");
    EXPECT_EQ(p.out, "");  // not "NOT sound — 0 records"
  }
  std::filesystem::create_directories(dir / "plain");
  test::ProcessResult p = test::RunProcess({WASTE_CLI_BINARY, "verify", dir / "plain"});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_EQ(p.err,
            "waste verify: not a waste container: " + (dir / "plain") + " (no manifest.json)\n");
  VerifyOptions o;
  o.container_dir = missing;
  Result<VerifyReport> r = Verify(o);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().message(), "no such directory: " + missing);
}

// Problems and errors are listed by layer, then expert, as numbers (2
// before 10), counted in words that agree with the count; --json is one
// line like every other command's.
TEST(ConvertE2E, VerifyListsProblemsInNumericOrderAndJsonOnOneLine) {
  TempDir dir;
  const std::string src =
      MakeCheckpoint(dir, "tiny", gen::CheckpointDType::kBf16, false, R"({"num_experts": 12})");
  const std::string out = dir / "out";
  ASSERT_TRUE(ConvertNow(src, out, 2));
  uint64_t record_bytes = 0;
  {
    auto c = Container::Open(out);
    ASSERT_TRUE(c) << c.error().message();
    ASSERT_EQ((*c)->bank(1).experts, 12);
    record_bytes = static_cast<uint64_t>((*c)->bank(1).record_bytes);
  }
  auto damage = [&](int layer, int expert) {
    std::fstream f(out + "/experts-L" + std::to_string(layer) + ".bin",
                   std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(expert * record_bytes + 200));
    f.put('\x11');
  };
  damage(3, 0);
  damage(1, 11);
  damage(1, 2);
  damage(1, 10);
  const std::vector<std::string> want = {"expert 2 of layer 1", "expert 10 of layer 1",
                                         "expert 11 of layer 1", "expert 0 of layer 3"};
  VerifyOptions o;
  o.container_dir = out;
  o.threads = 2;
  Result<VerifyReport> r = Verify(o);
  ASSERT_TRUE(r) << r.error().message();
  ASSERT_EQ(r->problems.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_TRUE(Has(r->problems[i], want[i])) << i << ": " << r->problems[i];

  test::ProcessResult p = test::RunProcess({WASTE_CLI_BINARY, "verify", out, "--threads", "2"});
  EXPECT_EQ(p.exit_code, 1);
  EXPECT_TRUE(Has(p.err, "layer 1: 12 records read, 3 problems\n")) << p.err;
  EXPECT_TRUE(Has(p.err, "layer 2: 12 records read, 0 problems\n")) << p.err;
  EXPECT_TRUE(Has(p.err, "layer 3: 12 records read, 1 problem\n")) << p.err;
  EXPECT_TRUE(Has(p.out, out + ": NOT sound (4 problems) — 36 records, ")) << p.out;
  size_t at = 0;
  for (const std::string& w : want) {
    const size_t next = p.out.find(w, at);
    ASSERT_NE(next, std::string::npos) << w << " in order in " << p.out;
    at = next;
  }

  p = test::RunProcess(
      {WASTE_CLI_BINARY, "verify", out, "--json", "--source", src, "--all", "--threads", "2"});
  EXPECT_EQ(p.exit_code, 1);
  ASSERT_FALSE(p.out.empty());
  EXPECT_EQ(p.out.find('\n'), p.out.size() - 1) << p.out.substr(0, 200);
  const nlohmann::json j = nlohmann::json::parse(p.out);
  for (const char* key :
       {"sound", "problems", "records_checked", "trunk_tensors_checked", "expert_median_error",
        "expert_max_error", "trunk_max_error", "rotation_block", "errors"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["problems"].get<std::vector<std::string>>(), r->problems);
  // Expert errors by (layer, expert), gate/up/down within each; the trunk after.
  std::vector<std::pair<int, int>> order;
  for (const auto& e : j["errors"]) {
    int layer = 0, expert = 0;
    char kind[8];
    if (std::sscanf(e["name"].get<std::string>().c_str(), "layer %d expert %d %7s", &layer, &expert,
                    kind) == 3) {
      order.emplace_back(layer, expert);
    }
  }
  ASSERT_EQ(order.size(), (36u - 4u) * 3u);
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));
  EXPECT_EQ(order[3], std::make_pair(1, 1));  // expert 2 of layer 1 is damaged: no error
  EXPECT_EQ(order[6], std::make_pair(1, 3));
  EXPECT_EQ(order[3 * 9], std::make_pair(2, 0));          // 10 and 11 are damaged too
  EXPECT_EQ(order[3 * 9 + 3 * 3], std::make_pair(2, 3));  // 3 after 2, not 10
}
#endif

}  // namespace
}  // namespace waste
