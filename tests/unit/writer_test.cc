// ContainerWriter and the generator: write, read back through Container,
// compare bytes and values; odd shapes (padded groups and row blocks),
// every trunk format, VQ4P, determinism, refusals; the generator's presets.
#include "writer/container_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "container/container.h"
#include "container_test_util.h"
#include "generator.h"
#include "platform/platform.h"
#include "container/tensor_list.h"
#include "tokenizer_gen.h"
#include "shared_fixtures.h"

namespace waste {
namespace {

using nlohmann::ordered_json;
using testing::ReadFile;
using testing::RecordBuffer;
using testing::TempDir;

// Kimi-Linear-shaped with odd widths: 136 = 128 + 8 (a padded trunk group),
// moe_inter 40 and down rows 136 (padded 64-row blocks).
ordered_json OddConfig() {
  return ordered_json{{"architectures", ordered_json::array({"KimiLinearForCausalLM"})},
                      {"hidden_size", 136},
                      {"num_hidden_layers", 3},
                      {"first_k_dense_replace", 1},
                      {"intermediate_size", 200},
                      {"moe_intermediate_size", 40},
                      {"num_experts", 4},
                      {"num_experts_per_token", 2},
                      {"num_shared_experts", 1},
                      {"moe_renormalize", true},
                      {"num_attention_heads", 2},
                      {"qk_nope_head_dim", 16},
                      {"qk_rope_head_dim", 8},
                      {"v_head_dim", 16},
                      {"kv_lora_rank", 24},
                      {"q_lora_rank", nullptr},
                      {"mla_use_nope", true},
                      {"vocab_size", 50},
                      {"linear_attn_config",
                       {{"head_dim", 16},
                        {"num_heads", 2},
                        {"short_conv_kernel_size", 4},
                        {"kda_layers", ordered_json::array({1, 3})}}}};
}

// What the writer must produce from `x` per FORMAT.md §4.5, decoded: the
// test's own quantiser, independent of the writer's code.
std::vector<float> ReferenceQuantized(TensorFmt fmt, const std::vector<float>& x, int64_t rows,
                                      int64_t cols) {
  if (fmt == TensorFmt::kF32) return x;
  const float qmax = fmt == TensorFmt::kQ8G ? 127 : fmt == TensorFmt::kQ4G ? 7 : 3;
  const float qmin = fmt == TensorFmt::kQ8G ? -127 : fmt == TensorFmt::kQ4G ? -8 : -4;
  std::vector<float> out(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t g0 = 0; g0 < cols; g0 += 128) {
      int64_t g1 = std::min(cols, g0 + 128);
      float amax = 1e-8f;
      for (int64_t i = g0; i < g1; ++i) amax = std::max(amax, std::fabs(x[r * cols + i]));
      float s = amax / qmax;
      float stored = format::F16ToF32(format::F32ToF16(s));
      for (int64_t i = g0; i < g1; ++i) {
        float q = std::clamp(std::nearbyint(x[r * cols + i] / s), qmin, qmax);
        out[r * cols + i] = stored * q;
      }
    }
  }
  return out;
}

struct Written {
  std::map<std::string, std::vector<float>> expected;   // dequantised trunk values
  std::vector<std::vector<uint8_t>> records;            // every record, bank order
  std::vector<float> books;                             // every codebook value written
};

// Writes OddConfig with random values: matrices cycle through Q8G/Q4G/Q3G,
// experts are VQ-encoded from random matrices.
Written WriteOdd(const std::string& dir, const ExpertQuant& quant, uint32_t seed) {
  Written w;
  WriterOptions o;
  o.arch = "kimi_linear";
  o.quant = quant;
  auto writer = ContainerWriter::Create(dir, OddConfig(), o);
  EXPECT_TRUE(writer.has_value()) << writer.error().ToString();
  if (!writer.has_value()) return w;
  ContainerWriter& cw = **writer;
  const ModelConfig& c = cw.config();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  const TensorFmt kinds[3] = {TensorFmt::kQ8G, TensorFmt::kQ4G, TensorFmt::kQ3G};
  int n = 0;
  for (const TensorSpec& spec : ModelTensors(c)) {
    std::vector<float> x(static_cast<size_t>(spec.elements()));
    for (float& v : x) v = uni(rng);
    TensorFmt fmt = spec.kind == TensorKind::kMatrix ? kinds[n++ % 3] : TensorFmt::kF32;
    EXPECT_TRUE(cw.AddTensor(spec.name, fmt, spec.shape, x).ok()) << spec.name;
    w.expected[spec.name] = ReferenceQuantized(fmt, x, spec.elements() / spec.shape.back(),
                                               spec.shape.back());
  }
  const format::RecordLayout& l = cw.record_layout();
  const size_t per_book = static_cast<size_t>(quant.entries) * quant.vec_dim;
  for (int layer = 0; layer < c.n_layers; ++layer) {
    if (c.ffn_kind[layer] != FfnKind::kMoe) continue;
    std::vector<float> books(3 * quant.stages * per_book);
    for (float& v : books) v = 0.3f * uni(rng);
    books[5] = 1e-6f;  // an f16 subnormal: must be written flushed
    EXPECT_TRUE(cw.AddCodebooks(layer, books).has_value());
    for (float& v : books) {
      uint16_t h = format::F32ToF16(v);
      v = format::F16ToF32Flush(h);
    }
    w.books.insert(w.books.end(), books.begin(), books.end());
    EXPECT_TRUE(cw.BeginBank(layer).ok());
    const int base = static_cast<int>(w.books.size() / per_book) - 3 * quant.stages;
    for (int e = 0; e < c.moe.n_experts; ++e) {
      ExpertRecordBuilder& b = cw.record();
      ExpertRecordBuilder twin(l);  // the same record built apart: the bytes to expect
      for (int kind = 0; kind < 3; ++kind) {
        const format::MatrixLayout& m = l.m[kind];
        std::vector<float> mat(static_cast<size_t>(m.rows) * m.cols);
        for (float& v : mat) v = 0.05f * uni(rng);
        const float* kind_books = books.data() + static_cast<size_t>(kind) * quant.stages * per_book;
        b.EncodeMatrix(kind, mat.data(), kind_books);
        twin.EncodeMatrix(kind, mat.data(), kind_books);
      }
      twin.Finish(layer, e, base);
      w.records.emplace_back(twin.data(), twin.data() + twin.size());
      EXPECT_TRUE(cw.AddRecord().ok());
    }
    EXPECT_TRUE(cw.EndBank().ok());
  }
  EXPECT_TRUE(cw.AddFile("notes.txt", "hello").ok());
  Status st = cw.Finish();
  EXPECT_TRUE(st.ok()) << st.ToString();
  return w;
}

void CheckRoundTrip(const ExpertQuant& quant) {
  TempDir dir;
  Written w = WriteOdd(dir.path(), quant, 7);
  auto opened = Container::Open(dir.path());
  ASSERT_TRUE(opened.has_value()) << opened.error().ToString();
  const Container& c = **opened;
  EXPECT_EQ(ReadFile(dir / "notes.txt"), "hello");

  // Trunk: every tensor decodes to exactly the §4.5 quantisation of its input.
  std::vector<float> row;
  for (const auto& [name, want] : w.expected) {
    const TensorView* t = c.Find(name);
    ASSERT_NE(t, nullptr) << name;
    row.resize(static_cast<size_t>(t->cols));
    for (int64_t r = 0; r < t->rows; ++r) {
      if (name == "model.embed_tokens.weight" && t->data == nullptr) {
        ASSERT_TRUE(c.ReadEmbeddingRow(static_cast<int>(r), row.data()).ok());
      } else {
        DequantizeRow(*t, r, row.data());
      }
      for (int64_t i = 0; i < t->cols; ++i) {
        ASSERT_EQ(row[i], want[r * t->cols + i]) << name << " [" << r << "," << i << "]";
      }
    }
  }

  // Codebooks: f16 of the input, subnormals flushed.
  ASSERT_EQ(static_cast<size_t>(c.codebook_count()) * quant.entries * quant.vec_dim,
            w.books.size());
  for (int b = 0; b < c.codebook_count(); ++b) {
    const float* book = c.Codebook(b);
    for (int i = 0; i < quant.entries * quant.vec_dim; ++i) {
      ASSERT_EQ(book[i], w.books[static_cast<size_t>(b) * quant.entries * quant.vec_dim + i]);
    }
  }

  // Records: every one parses with its CRC, padding rows are zero, and the
  // reconstruction follows the indices the encoder picked.
  const format::RecordLayout& l = c.record_layout();
  for (int layer = 1; layer < 3; ++layer) {
    RecordBuffer buf(l.record_bytes);
    for (int e = 0; e < 4; ++e) {
      ASSERT_TRUE(c.bank_file(layer).ReadAt(e * l.record_bytes, buf.data(), buf.size()).ok());
      Result<ExpertRecordView> v = c.ParseRecord(layer, e, buf.data(), true);
      ASSERT_TRUE(v.has_value()) << v.error().ToString();
      const std::vector<uint8_t>& want = w.records[static_cast<size_t>((layer - 1) * 4 + e)];
      ASSERT_EQ(want.size(), buf.size());
      ASSERT_EQ(std::memcmp(want.data(), buf.data(), buf.size()), 0) << "record " << layer << "/" << e;
      const format::MatrixLayout& down = l.m[format::kDown];  // 136 rows: 64 + 64 + 8
      ASSERT_EQ(down.nb, 3);
      for (int r = down.rows; r < down.nb * 64; ++r) {
        for (int k = 0; k < l.run_bytes; ++k) {
          ASSERT_EQ(buf[format::IndexRunOffset(l, format::kDown, r, 0) + k], 0);
        }
      }
      std::vector<float> got(136);
      c.DequantizeExpertRow(*v, format::kDown, 135, got.data());
      uint8_t idx[8];
      format::DecodeRun(l, buf.data() + format::IndexRunOffset(l, format::kDown, 135, 2), idx);
      const int base = v->codebook_id + 2 * l.stages;
      for (int j = 0; j < l.vec_dim; ++j) {
        float sum = 0;
        for (int s = 0; s < l.stages; ++s) sum += c.Codebook(base + s)[idx[s] * l.vec_dim + j];
        ASSERT_EQ(got[2 * l.vec_dim + j], format::F16ToF32(v->scale_down[135]) * sum);
      }
    }
  }
}

TEST(Writer, RoundTripVq3r) { CheckRoundTrip(ExpertQuant{3, 8, 256, 8, "VQ3R"}); }
TEST(Writer, RoundTripVq4p) { CheckRoundTrip(ExpertQuant{4, 8, 64, 6, "VQ4P"}); }
TEST(Writer, RoundTripVq2rSixteenEntries) { CheckRoundTrip(ExpertQuant{2, 8, 16, 8, "VQ2R"}); }

TEST(Writer, SameInputSameBytes) {
  TempDir a, b;
  WriteOdd(a.path(), ExpertQuant{}, 3);
  WriteOdd(b.path(), ExpertQuant{}, 3);
  for (const char* f : {"manifest.json", "trunk.bin", "codebooks.bin", "experts-L1.bin",
                        "experts-L2.bin"}) {
    EXPECT_EQ(ReadFile(a / f), ReadFile(b / f)) << f;
  }
  // The manifest says what FORMAT.md §11 asks of a writer.
  ordered_json m = ordered_json::parse(ReadFile(a / "manifest.json"));
  EXPECT_EQ(m["format_version"], 0);
  EXPECT_EQ(m["expert_quant"]["index_block"], 64);
  EXPECT_EQ(m["expert_quant"]["fmt"], "VQ3R");
  EXPECT_EQ(m["trunk"][0]["group"], 128);
  EXPECT_EQ(m["layers"]["2"]["codebook_base"], 9);
}

TEST(Writer, EncoderApproximatesTheMatrix) {
  // Greedy residual VQ with codebooks that can represent the data: the
  // reconstruction error must be well below the signal.
  format::RecordLayout l = *format::ComputeRecordLayout(64, 128, ExpertQuant{});
  ExpertRecordBuilder b(l);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-1.0f, 1.0f);
  std::vector<float> books(3 * 256 * 8);
  for (int s = 0; s < 3; ++s) {
    for (int i = 0; i < 256 * 8; ++i) books[s * 2048 + i] = uni(rng) * std::ldexp(1.0f, -s);
  }
  std::vector<float> w(64 * 128);
  for (float& v : w) v = uni(rng);
  b.EncodeMatrix(format::kGate, w.data(), books.data());
  double err = 0, sig = 0;
  for (int r = 0; r < 64; ++r) {
    float scale = format::F16ToF32(b.scales(format::kGate)[r]);
    for (int v = 0; v < 16; ++v) {
      uint8_t idx[3];
      b.GetRun(format::kGate, r, v, idx);
      for (int j = 0; j < 8; ++j) {
        float rec = 0;
        for (int s = 0; s < 3; ++s) rec += books[s * 2048 + idx[s] * 8 + j];
        double d = scale * rec - w[r * 128 + v * 8 + j];
        err += d * d;
        sig += w[r * 128 + v * 8 + j] * w[r * 128 + v * 8 + j];
      }
    }
  }
  EXPECT_LT(err / sig, 0.5);
}

TEST(Writer, Refusals) {
  TempDir dir;
  auto w = ContainerWriter::Create(dir.path(), OddConfig(), WriterOptions{});
  ASSERT_TRUE(w.has_value());
  ContainerWriter& cw = **w;
  std::vector<float> x(4, 0.0f);
  EXPECT_FALSE(cw.AddTensor("bad\"name", TensorFmt::kF32, {4}, x).ok());
  EXPECT_FALSE(cw.AddTensor("x", TensorFmt::kF32, {5}, x).ok());
  EXPECT_FALSE(cw.AddTensor("x", TensorFmt::kF16, {4}, x).ok());
  EXPECT_FALSE(cw.AddTensor("x", TensorFmt::kF32, {1, 1, 1, 1, 4}, x).ok());
  std::vector<float> inf = {INFINITY, 1, 2, 3};
  EXPECT_FALSE(cw.AddTensor("x", TensorFmt::kQ8G, {4}, inf).ok());
  EXPECT_FALSE(cw.BeginBank(0).ok());      // dense layer
  EXPECT_FALSE(cw.BeginBank(1).ok());      // no codebooks yet
  EXPECT_FALSE(cw.AddCodebooks(1, x).has_value());  // wrong size
  EXPECT_FALSE(cw.AddFile("../x", "y").ok());
  Status st = cw.Finish();  // banks missing
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("no expert bank"), std::string::npos);
  EXPECT_FALSE(platform::PathExists(dir / "manifest.json"));

  ordered_json bad = OddConfig();
  bad["hidden_size"] = 0;
  EXPECT_FALSE(ContainerWriter::Create(dir.path(), bad, WriterOptions{}).has_value());
}

TEST(Writer, FinishRefusesAnIncompleteTrunk) {
  // Banks and codebooks but no tensors: the writer's own reader check stops
  // it from leaving a manifest behind.
  TempDir dir;
  auto w = ContainerWriter::Create(dir.path(), OddConfig(), WriterOptions{});
  ASSERT_TRUE(w.has_value());
  ContainerWriter& cw = **w;
  std::vector<float> books(3 * 3 * 256 * 8, 0.1f);
  for (int layer : {1, 2}) {
    ASSERT_TRUE(cw.AddCodebooks(layer, books).has_value());
    ASSERT_TRUE(cw.BeginBank(layer).ok());
    for (int e = 0; e < 4; ++e) ASSERT_TRUE(cw.AddRecord().ok());
    ASSERT_TRUE(cw.EndBank().ok());
  }
  Status st = cw.Finish();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("required tensor is missing"), std::string::npos);
}

// ---- the generator ----------------------------------------------------------

Result<gen::GenReport> Gen(const std::string& dir, const std::string& preset, bool tok = false,
                           bool vq4p = false, bool manifest_only = false) {
  gen::GenOptions o;
  o.out_dir = dir;
  o.preset = preset;
  o.tokenizer = tok;
  o.vq4p = vq4p;
  o.manifest_only = manifest_only;
  o.trace = "none";
  return gen::Generate(o);
}

TEST(Generator, TinyHasTheReferenceShape) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  TempDir dir;
  auto r = Gen(dir.path(), "tiny");
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->params.total, 1113764u);
  EXPECT_EQ(r->params.active, 638628u);
  auto c = Container::Open(dir.path());
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  // Same config, bank index, trunk index (names, formats, offsets, shapes,
  // sizes) and file sizes as the reference generator's container.
  ordered_json ours = ordered_json::parse(ReadFile(dir / "manifest.json"));
  ordered_json ref = ordered_json::parse(ReadFile(testing::FixtureDir("warp-tiny") + "/manifest.json"));
  EXPECT_EQ(ours["config"], ref["config"]);
  EXPECT_EQ(ours["layers"], ref["layers"]);
  EXPECT_EQ(ours["trunk"], ref["trunk"]);
  for (const char* f : {"trunk.bin", "codebooks.bin", "experts-L1.bin", "experts-L3.bin"}) {
    EXPECT_EQ(ReadFile(dir / f).size(), ReadFile(testing::FixtureDir("warp-tiny") + "/" + f).size())
        << f;
  }
  // Every record verifies.
  const Container& cc = **c;
  RecordBuffer buf(12288);
  for (int layer = 1; layer < 4; ++layer) {
    for (int e = 0; e < 8; ++e) {
      ASSERT_TRUE(cc.bank_file(layer).ReadAt(e * 12288ull, buf.data(), buf.size()).ok());
      ASSERT_TRUE(cc.ParseRecord(layer, e, buf.data(), true).has_value());
    }
  }
}

TEST(Generator, DeterministicBySeed) {
  TempDir a, b, d;
  ASSERT_TRUE(Gen(a.path(), "tiny").has_value());
  ASSERT_TRUE(Gen(b.path(), "tiny").has_value());
  gen::GenOptions o;
  o.out_dir = d.path();
  o.seed = 1;
  o.trace = "none";
  ASSERT_TRUE(gen::Generate(o).has_value());
  for (const char* f : {"trunk.bin", "codebooks.bin", "experts-L2.bin", "manifest.json"}) {
    EXPECT_EQ(ReadFile(a / f), ReadFile(b / f)) << f;
    if (std::string(f) != "manifest.json") EXPECT_NE(ReadFile(a / f), ReadFile(d / f)) << f;
  }
}

TEST(Generator, TokenizerFiles) {
  TempDir dir;
  auto r = Gen(dir.path(), "tiny", /*tok=*/true);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  gen::GeneratedTokenizer t = gen::MakeTokenizer();
  EXPECT_GT(t.n_ranks, 256 + 200);  // a few hundred real merges
  EXPECT_EQ(t.n_specials, 11);
  auto c = Container::Open(dir.path());
  ASSERT_TRUE(c.has_value()) << c.error().ToString();
  EXPECT_EQ((*c)->config().vocab, t.vocab());
  EXPECT_EQ((*c)->config().eos_token_id, t.n_ranks + 2);
  std::string model = ReadFile(dir / "tokenizer.model");
  EXPECT_EQ(model.substr(0, 14), "AA== 0\nAQ== 1\n");
  EXPECT_EQ(std::count(model.begin(), model.end(), '\n'), t.n_ranks);
  ordered_json specials = ordered_json::parse(ReadFile(dir / "specials.json"));
  ASSERT_EQ(specials.size(), 11u);
  EXPECT_EQ(specials[0]["id"], t.n_ranks);
  EXPECT_EQ(specials[0]["text"], "[BOS]");
  EXPECT_EQ(specials[2]["text"], "<|end_of_msg|>");
  ordered_json chat = ordered_json::parse(ReadFile(dir / "chat.json"));
  EXPECT_EQ(chat["open"], "<|open|>assistant<|sep|>");
  // Common words of the training text became single tokens.
  EXPECT_NE(std::find(t.tokens.begin(), t.tokens.end(), " the"), t.tokens.end());
}

TEST(Generator, EveryPresetShapeOpens) {
  for (const auto& [preset, vq4p] :
       {std::pair{"deepseek-v3-tiny", false}, std::pair{"k3-tiny", false},
        std::pair{"tiny", true}, std::pair{"k3-tiny", true}}) {
    TempDir dir;
    auto r = Gen(dir.path(), preset, false, vq4p);
    ASSERT_TRUE(r.has_value()) << preset << ": " << r.error().ToString();
    auto c = Container::Open(dir.path());
    ASSERT_TRUE(c.has_value()) << preset << ": " << c.error().ToString();
    const ModelConfig& cfg = (*c)->config();
    EXPECT_EQ(cfg.quant.index_bits, vq4p ? 6 : 8);
    if (std::string(preset) == "deepseek-v3-tiny") {
      EXPECT_EQ(cfg.n_mla_layers(), 4);
      EXPECT_TRUE(cfg.rope.enabled);
      EXPECT_TRUE(cfg.rope.yarn);
      EXPECT_GT(cfg.mla.q_lora_rank, 0);
      EXPECT_NE((*c)->Find("model.layers.1.self_attn.q_b_proj.weight"), nullptr);
    }
    if (std::string(preset) == "k3-tiny") {
      EXPECT_EQ(cfg.tensor_prefix, "language_model.");
      EXPECT_EQ(cfg.arch, "kimi-k3");
      EXPECT_EQ(cfg.expert_in(), 96);
      EXPECT_EQ(cfg.act, Activation::kSitu);
      EXPECT_TRUE(cfg.moe.latent_norm && cfg.mla.output_gate && cfg.kda.gate_rank == KdaGateRank::kFull);
      EXPECT_EQ(cfg.attn_res.block, 2);
      const TensorView* a_log = (*c)->Find("model.layers.0.self_attn.A_log");
      ASSERT_NE(a_log, nullptr);
      EXPECT_EQ(a_log->elements(), 8);  // padded past 4 heads
      EXPECT_EQ((*c)->Find("vision_tower.encoder.layers.0.fc0.weight"), nullptr);  // not loaded
      EXPECT_NE((*c)->Find("model.output_attn_res_proj.weight"), nullptr);
    }
  }
}

TEST(Generator, KimiLinearManifestReportsItsSize) {
  // The full 48B shape, manifest only: exact offsets, no data written.
  TempDir dir;
  auto r = Gen(dir.path(), "kimi-linear", false, false, /*manifest_only=*/true);
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_FALSE(platform::PathExists(dir / "trunk.bin"));
  Result<Manifest> m = ParseManifest(ReadFile(dir / "manifest.json"));
  ASSERT_TRUE(m.has_value()) << m.error().ToString();
  const ModelConfig& c = m->config;
  EXPECT_EQ(c.n_layers, 27);
  EXPECT_EQ(c.n_kda_layers(), 20);
  EXPECT_EQ(c.n_moe_layers(), 26);
  EXPECT_EQ(m->banks[1].record_bytes, 2666496u);
  ParamCounts p = CountParameters(*m);
  EXPECT_NEAR(p.total / 1e9, 49.12, 0.05);
  EXPECT_NEAR(p.active / 1e9, 3.11, 0.02);
  EXPECT_EQ(r->params.total, p.total);
  EXPECT_TRUE(ValidateRequiredTensors(*m).ok());
}

}  // namespace
}  // namespace waste
