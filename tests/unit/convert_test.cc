// The converter's pieces against hand-computed values: source number
// formats (int4 pack-quantized with its config and every refusal),
// safetensors validation (errors name file and tensor), the trunk
// quantiser's error against max scaling, k-means determinism across thread
// counts, and the families it accepts (exactly the engine's family table).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/dequant.h"
#include "convert/residual_basis.h"
#include "convert/safetensors.h"
#include "convert/source_model.h"
#include "convert/trunk_quant.h"
#include "convert/vq.h"
#include "format/format.h"
#include "model/families.h"
#include "runtime/thread_pool.h"
#include "temp_dir.h"

namespace waste::convert {
namespace {

using waste::testing::TempDir;

// One list of families: every architecture name of the engine's family
// table converts as that family (and the engine reads it as the same one);
// an architecture the table does not list is refused, and the refusal names
// every accepted one.
TEST(ConvertFamilies, AcceptedArchitecturesAreTheFamilyTable) {
  std::vector<std::string> accepted;
  ForEachFamily([&](const Family& f) {
    for (std::string_view name : f.architectures) {
      const std::string arch = std::string(name) + "ForCausalLM";
      Result<const Family*> r = ConvertibleFamily(arch, "config.json");
      ASSERT_TRUE(r.has_value()) << arch << ": " << r.error().ToString();
      EXPECT_EQ(*r, &f) << arch;
      EXPECT_EQ(&FamilyForArchitecture(arch), &f) << arch;
      EXPECT_FALSE(f.key.empty()) << arch;
      accepted.push_back(std::string(name));
    }
  });
  EXPECT_GE(accepted.size(), 4u);
  for (const char* arch : {"SomeOtherForCausalLM", "", "MixtralForCausalLM"}) {
    Result<const Family*> r = ConvertibleFamily(arch, "ckpt/config.json");
    ASSERT_FALSE(r.has_value()) << arch;
    EXPECT_EQ(r.error().code(), Errc::kUnsupported);
    const std::string& m = r.error().message();
    EXPECT_NE(m.find("ckpt/config.json"), std::string::npos) << m;
    EXPECT_NE(m.find(std::string("\"") + arch + "\""), std::string::npos) << m;
    for (const std::string& name : accepted) EXPECT_NE(m.find(name), std::string::npos) << m;
  }
}

// DeepSeek-V2 is its own family (docs/CONVERT.md, "DeepSeek-V2").
TEST(ConvertFamilies, DeepSeekV2IsItsOwnFamily) {
  Result<const Family*> v2 = ConvertibleFamily("DeepseekV2ForCausalLM", "config.json");
  Result<const Family*> v3 = ConvertibleFamily("DeepseekV3ForCausalLM", "config.json");
  ASSERT_TRUE(v2.has_value() && v3.has_value());
  EXPECT_EQ((*v2)->key, "deepseek-v2");
  EXPECT_EQ((*v3)->key, "deepseek-v3");
  EXPECT_NE((*v2)->check_supported, nullptr);  // what V2 cannot run is refused at open
}

TEST(ConvertDequant, Bf16AndF16AreExact) {
  EXPECT_EQ(Bf16ToF32(0x3F80), 1.0f);
  EXPECT_EQ(Bf16ToF32(0xC040), -3.0f);
  EXPECT_EQ(Bf16ToF32(0x3E20), 0.15625f);
  const uint8_t f16[4] = {0x00, 0x3C, 0x00, 0xC2};  // 1.0, -3.0
  float out[2];
  ASSERT_TRUE(DecodeFloats(DType::kF16, f16, 2, out, "t").ok());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -3.0f);
}

TEST(ConvertDequant, E4M3ByHand) {
  EXPECT_EQ(E4M3ToF32(0x38), 1.0f);                 // E=7, m=0
  EXPECT_EQ(E4M3ToF32(0xB8), -1.0f);
  EXPECT_EQ(E4M3ToF32(0x7E), 448.0f);               // E=15, m=6: the largest finite
  EXPECT_EQ(E4M3ToF32(0x01), std::ldexp(1.0f, -9)); // subnormal: 1/8 * 2^-6
  EXPECT_EQ(E4M3ToF32(0x0F), 1.875f * std::ldexp(1.0f, -6));  // E=1, m=7
  EXPECT_EQ(E4M3ToF32(0x44), 3.0f);                 // E=8, m=4: 1.5 * 2
  EXPECT_TRUE(std::isnan(E4M3ToF32(0x7F)));
  EXPECT_TRUE(std::isnan(E4M3ToF32(0xFF)));
}

TEST(ConvertDequant, E5M2ByHand) {
  EXPECT_EQ(E5M2ToF32(0x3C), 1.0f);
  EXPECT_EQ(E5M2ToF32(0xC2), -3.0f);
  EXPECT_EQ(E5M2ToF32(0x7B), 57344.0f);
  EXPECT_TRUE(std::isinf(E5M2ToF32(0x7C)));
}

TEST(ConvertDequant, Fp8BlockScalesUseTheConfiguredTile) {
  // 3 x 5 matrix of ones, tile 2 x 2: scale grid 2 x 3; partial edge tiles
  // take the scale of the tile they fall in.
  std::vector<float> w(15, 1.0f);
  const float s[6] = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(ApplyBlockScales(w.data(), 3, 5, s, 2, 3, 2, 2, "t").ok());
  const float want[15] = {1, 1, 2, 2, 3, 1, 1, 2, 2, 3, 4, 4, 5, 5, 6};
  for (int i = 0; i < 15; ++i) EXPECT_EQ(w[i], want[i]) << i;
  // The same scale grid read with a tile that does not produce it is refused.
  Status st = ApplyBlockScales(w.data(), 3, 5, s, 2, 3, 3, 2, "shard.safetensors: tensor x");
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("tensor x"), std::string::npos);
}

TEST(ConvertDequant, Mxfp4ByHand) {
  EXPECT_EQ(Mxfp4Value(7), 6.0f);
  EXPECT_EQ(Mxfp4Value(15), -6.0f);
  EXPECT_EQ(Mxfp4Value(9), -0.5f);
  EXPECT_EQ(Mxfp4Value(5), 3.0f);
  // One row of 32: byte k holds elements 2k (low nibble) and 2k+1 (high).
  std::vector<uint8_t> packed(16, 0);
  packed[0] = 0x7A;   // element 0: 0xA -> -1, element 1: 0x7 -> 6
  packed[15] = 0x92;  // element 30: 0x2 -> 1, element 31: 0x9 -> -0.5
  const uint8_t scale = 128;  // 2^(128-127) = 2
  float out[32];
  DecodeMxfp4(packed.data(), &scale, 1, 32, out);
  EXPECT_EQ(out[0], -2.0f);
  EXPECT_EQ(out[1], 12.0f);
  EXPECT_EQ(out[30], 2.0f);
  EXPECT_EQ(out[31], -1.0f);
  EXPECT_EQ(out[5], 0.0f);
  const uint8_t zero_scale = 0;  // e = 0 decodes to 0
  DecodeMxfp4(packed.data(), &zero_scale, 1, 32, out);
  EXPECT_EQ(out[1], 0.0f);
}

// A safetensors file from (name, dtype, shape, bytes), optionally damaged.
struct FakeTensor {
  std::string name, dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
void WriteSafetensors(const std::string& path, const std::vector<FakeTensor>& ts, int64_t cut = 0,
                      int64_t lie = 0) {
  nlohmann::ordered_json h = nlohmann::ordered_json::object();
  uint64_t off = 0;
  for (const FakeTensor& t : ts) {
    h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.bytes.size() + lie}}};
    off += t.bytes.size();
  }
  std::string text = h.dump();
  while ((8 + text.size()) % 8) text += ' ';
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[i] = static_cast<char>((text.size() >> (8 * i)) & 0xFF);
  file += text;
  for (const FakeTensor& t : ts) file.append(t.bytes.begin(), t.bytes.end());
  file.resize(file.size() - static_cast<size_t>(cut));
  std::ofstream(path, std::ios::binary) << file;
}

std::vector<uint8_t> Bf16Bytes(std::vector<uint16_t> v) {
  std::vector<uint8_t> b(v.size() * 2);
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(ConvertSafetensors, ReadsASingleFileCheckpoint) {
  TempDir dir;
  WriteSafetensors(dir / "model.safetensors",
                   {{"a.weight", "BF16", {2, 2}, Bf16Bytes({0x3F80, 0x4000, 0xC040, 0x0000})},
                    {"b", "F32", {}, std::vector<uint8_t>{0, 0, 0x80, 0x3F}}});
  auto ck = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ck) << ck.error().message();
  auto a = LoadF32(**ck, "a.weight", SourceQuant{});
  ASSERT_TRUE(a) << a.error().message();
  EXPECT_EQ(a->values, (std::vector<float>{1, 2, -3, 0}));
  auto b = LoadF32(**ck, "b", SourceQuant{});
  ASSERT_TRUE(b);
  EXPECT_EQ(b->values, std::vector<float>{1.0f});
  EXPECT_TRUE(b->shape.empty());
}

TEST(ConvertSafetensors, TruncatedShardNamesFileAndTensor) {
  TempDir dir;
  WriteSafetensors(dir / "model.safetensors",
                   {{"x.weight", "BF16", {2, 2}, Bf16Bytes({1, 2, 3, 4})},
                    {"y.weight", "BF16", {2, 2}, Bf16Bytes({1, 2, 3, 4})}},
                   /*cut=*/3);
  auto ck = Checkpoint::Open(dir.path());
  ASSERT_FALSE(ck);
  EXPECT_NE(ck.error().message().find("model.safetensors"), std::string::npos);
  EXPECT_NE(ck.error().message().find("y.weight"), std::string::npos);
  EXPECT_NE(ck.error().message().find("truncated"), std::string::npos);
}

TEST(ConvertSafetensors, ByteCountMustMatchShapeAndDtype) {
  TempDir dir;
  WriteSafetensors(dir / "model.safetensors", {{"x.weight", "F32", {3}, std::vector<uint8_t>(8)}});
  auto ck = Checkpoint::Open(dir.path());
  ASSERT_FALSE(ck);
  EXPECT_NE(ck.error().message().find("x.weight"), std::string::npos);
}

TEST(ConvertSafetensors, UnknownDtypeAndIntegerTensorsAreRefused) {
  TempDir dir;
  WriteSafetensors(dir / "model.safetensors", {{"x", "F4_E2M1", {2}, std::vector<uint8_t>(1)}});
  EXPECT_FALSE(Checkpoint::Open(dir.path()));
  TempDir dir2;
  WriteSafetensors(dir2 / "model.safetensors", {{"x.weight", "I32", {2}, std::vector<uint8_t>(8)}});
  auto ck = Checkpoint::Open(dir2.path());
  ASSERT_TRUE(ck);
  auto x = LoadF32(**ck, "x.weight", SourceQuant{});
  ASSERT_FALSE(x);
  EXPECT_NE(x.error().message().find("I32"), std::string::npos);
}

TEST(ConvertSafetensors, IndexEntryMissingFromItsShard) {
  TempDir dir;
  WriteSafetensors(dir / "model-00001-of-00001.safetensors", {{"x", "F32", {1}, std::vector<uint8_t>(4)}});
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata":{},"weight_map":{"x":"model-00001-of-00001.safetensors","gone":"model-00001-of-00001.safetensors"}})";
  auto ck = Checkpoint::Open(dir.path());
  ASSERT_FALSE(ck);
  EXPECT_NE(ck.error().message().find("gone"), std::string::npos);
}

TEST(ConvertSafetensors, Fp8NeedsItsScaleAndTheConfiguredTile) {
  TempDir dir;
  WriteSafetensors(dir / "model.safetensors",
                   {{"m.up_proj.weight", "F8_E4M3", {2, 2}, {0x38, 0x38, 0x38, 0x38}},
                    {"n.up_proj.weight", "F8_E4M3", {2, 2}, {0x38, 0x40, 0x38, 0x38}},
                    {"n.up_proj.weight_scale_inv", "F32", {1, 1}, {0, 0, 0, 0x40}}});
  auto ck = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ck);
  auto m = LoadF32(**ck, "m.up_proj.weight", SourceQuant{});
  ASSERT_FALSE(m);
  EXPECT_NE(m.error().message().find("m.up_proj.weight_scale_inv"), std::string::npos);
  auto n = LoadF32(**ck, "n.up_proj.weight", SourceQuant{});
  ASSERT_FALSE(n);  // no weight_block_size in the config: never guessed
  EXPECT_NE(n.error().message().find("weight_block_size"), std::string::npos);
  SourceQuant q;
  q.fp8_block_known = true;
  auto n2 = LoadF32(**ck, "n.up_proj.weight", q);
  ASSERT_TRUE(n2) << n2.error().message();
  EXPECT_EQ(n2->values, (std::vector<float>{2, 4, 2, 2}));  // scale 2.0 times 1, 2, 1, 1
}

TEST(ConvertSafetensors, Mxfp4NeedsItsScale) {
  TempDir dir;
  WriteSafetensors(dir / "model.safetensors", {{"e.w1.weight_packed", "U8", {1, 16}, std::vector<uint8_t>(16, 0x22)}});
  auto ck = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ck);
  auto w = LoadF32(**ck, "e.w1.weight", SourceQuant{});
  ASSERT_FALSE(w);
  EXPECT_NE(w.error().message().find("e.w1.weight_scale"), std::string::npos);
}

// --- compressed-tensors pack-quantized int4 (Kimi-K2-Thinking) -------------
//
// The words below are written by hand from the format (column c in word
// c / 8 at bits 4 (c % 8), nibble q + 8), not by an encoder: a 2 x 11 matrix
// in groups of 4 columns, so the last word has 5 padding nibbles and the
// last group 3 columns.
//   row 0: q = -8 7 0 -1 | 1 -2 3 -7 | 5 -3 6, scales 0.5 2 0.25
//   row 1: q = 0 ... 0 7 (column 10),           scales 1 1 3
// Row 0's padding nibbles are 0xF (q = 7), row 1's 0 (q = -8): neither may
// show up anywhere.
const std::vector<uint32_t> kInt4Words = {0x1B6978F0u, 0xFFFFFE5Du, 0x88888888u, 0x00000F88u};
const std::vector<float> kInt4Want = {-4, 3.5f, 0, -0.5f, 2, -4, 6, -14, 1.25f, -0.75f, 1.5f,
                                      0,  0,    0, 0,     0, 0,  0, 0,   0,     0,      21};

std::vector<uint8_t> WordBytes(const std::vector<uint32_t>& w) {
  std::vector<uint8_t> b(w.size() * 4);
  for (size_t i = 0; i < w.size(); ++i) {
    for (int k = 0; k < 4; ++k) b[4 * i + k] = static_cast<uint8_t>(w[i] >> (8 * k));  // little endian
  }
  return b;
}

template <typename T>
std::vector<uint8_t> RawBytes(const std::vector<T>& v) {
  std::vector<uint8_t> b(v.size() * sizeof(T));
  std::memcpy(b.data(), v.data(), b.size());
  return b;
}

TEST(ConvertDequant, Int4ByHand) {
  const float scale[6] = {0.5f, 2, 0.25f, 1, 1, 3};
  const std::vector<uint8_t> packed = WordBytes(kInt4Words);
  std::vector<float> out(22, -99.0f);
  DecodeInt4(packed.data(), scale, 2, 11, 4, out.data());
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], kInt4Want[i]) << i;
  // Nibble by nibble: n -> (n - 8) for every n, in every position of a word.
  for (int n = 0; n < 16; ++n) {
    for (int k = 0; k < 8; ++k) {
      const std::vector<uint8_t> word = WordBytes({0x88888888u ^ ((static_cast<uint32_t>(n) ^ 8u) << (4 * k))});
      const float one = 1.0f;
      float v[8];
      DecodeInt4(word.data(), &one, 1, 8, 8, v);
      for (int c = 0; c < 8; ++c) EXPECT_EQ(v[c], c == k ? static_cast<float>(n - 8) : 0.0f) << n << " " << k;
    }
  }
}

// The hand-made matrix above as a checkpoint: W_packed, W_scale in `scale_dtype`,
// W_shape in `shape_dtype`, plus whatever `extra` adds.
std::vector<FakeTensor> Int4Tensors(const std::string& scale_dtype, const std::string& shape_dtype,
                                    std::vector<FakeTensor> extra = {}) {
  std::vector<uint8_t> scale;
  if (scale_dtype == "BF16") scale = Bf16Bytes({0x3F00, 0x4000, 0x3E80, 0x3F80, 0x3F80, 0x4040});
  if (scale_dtype == "F16") scale = Bf16Bytes({0x3800, 0x4000, 0x3400, 0x3C00, 0x3C00, 0x4200});
  if (scale_dtype == "F32") scale = RawBytes(std::vector<float>{0.5f, 2, 0.25f, 1, 1, 3});
  if (scale_dtype == "I32") scale = RawBytes(std::vector<int32_t>{1, 2, 3, 4, 5, 6});
  std::vector<FakeTensor> ts = {
      {"e.gate_proj.weight_packed", "I32", {2, 2}, WordBytes(kInt4Words)},
      {"e.gate_proj.weight_scale", scale_dtype, {2, 3}, scale},
      {"e.gate_proj.weight_shape", shape_dtype, {2},
       shape_dtype == "I64" ? RawBytes(std::vector<int64_t>{2, 11}) : RawBytes(std::vector<int32_t>{2, 11})}};
  for (FakeTensor& t : extra) {
    auto same = std::find_if(ts.begin(), ts.end(), [&](const FakeTensor& o) { return o.name == t.name; });
    if (same != ts.end()) {
      *same = t;  // a replacement
    } else {
      ts.push_back(t);
    }
  }
  return ts;
}

SourceQuant Int4Quant(int group = 4) {
  SourceQuant q;
  q.int4_packed = true;
  q.int4_group = group;
  return q;
}

// Loads e.gate_proj.weight from a one-file checkpoint of `ts`.
Result<F32Tensor> LoadInt4(const std::vector<FakeTensor>& ts, const SourceQuant& q) {
  TempDir dir;
  WriteSafetensors(dir / "model.safetensors", ts);
  auto ck = Checkpoint::Open(dir.path());
  if (!ck) return ck.error();
  return LoadF32(**ck, "e.gate_proj.weight", q);
}

TEST(ConvertSafetensors, Int4LoadsWithEveryScaleAndShapeDtype) {
  for (const char* scale : {"BF16", "F16", "F32"}) {
    for (const char* shape : {"I32", "I64"}) {
      SCOPED_TRACE(std::string(scale) + " scales, " + shape + " shape");
      auto w = LoadInt4(Int4Tensors(scale, shape), Int4Quant());
      ASSERT_TRUE(w) << w.error().message();
      EXPECT_EQ(w->shape, (std::vector<int64_t>{2, 11}));
      EXPECT_EQ(w->values, kInt4Want);
    }
  }
  // What the converter counts as read: codes, scales and the shape.
  TempDir dir;
  WriteSafetensors(dir / "model.safetensors", Int4Tensors("BF16", "I64"));
  auto ck = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ck);
  EXPECT_EQ(SourceBytes(**ck, "e.gate_proj.weight"), 16u + 12u + 16u);
}

// Every refusal names the tensor and what is wrong with it.
TEST(ConvertSafetensors, Int4RefusesWhatItCannotDecode) {
  struct Case {
    const char* why;
    std::vector<FakeTensor> tensors;
    SourceQuant q;
    const char* says;
    Errc code = Errc::kFormat;
  };
  const std::vector<Case> cases = {
      {"I32 codes without a pack-quantized config", Int4Tensors("BF16", "I64"), SourceQuant{},
       "e.gate_proj.weight_packed: dtype I32 (pack-quantized int4), but config.json"},
      {"U8 codes under a pack-quantized config",
       Int4Tensors("BF16", "I64", {{"e.gate_proj.weight_packed", "U8", {2, 8}, WordBytes(kInt4Words)}}), Int4Quant(),
       "dtype U8, but config.json declares pack-quantized int4"},
      {"no scale", {Int4Tensors("BF16", "I64")[0], Int4Tensors("BF16", "I64")[2]}, Int4Quant(),
       "without their scale tensor e.gate_proj.weight_scale"},
      {"no shape", {Int4Tensors("BF16", "I64")[0], Int4Tensors("BF16", "I64")[1]}, Int4Quant(),
       "without their shape tensor e.gate_proj.weight_shape"},
      {"shape of another dtype",
       Int4Tensors("BF16", "I64", {{"e.gate_proj.weight_shape", "F32", {2}, RawBytes(std::vector<float>{2, 11})}}),
       Int4Quant(), "weight_shape: dtype F32"},
      {"shape with three numbers",
       Int4Tensors("BF16", "I64", {{"e.gate_proj.weight_shape", "I64", {3}, RawBytes(std::vector<int64_t>{2, 11, 1})}}),
       Int4Quant(), "expected 2 elements"},
      {"shape that is no matrix",
       Int4Tensors("BF16", "I64", {{"e.gate_proj.weight_shape", "I64", {2}, RawBytes(std::vector<int64_t>{2, 0})}}),
       Int4Quant(), "[2, 0] is not a matrix shape"},
      {"too many columns for the words",  // 17 columns need 3 words
       Int4Tensors("BF16", "I64", {{"e.gate_proj.weight_shape", "I64", {2}, RawBytes(std::vector<int64_t>{2, 17})}}),
       Int4Quant(), "packed shape [2, 2], a [2, 17] matrix (e.gate_proj.weight_shape) needs [2, 3]"},
      {"a truncated row of words (one word per row)",
       Int4Tensors("BF16", "I64", {{"e.gate_proj.weight_packed", "I32", {2, 1}, WordBytes({1, 2})}}), Int4Quant(),
       "packed shape [2, 1]"},
      {"rows disagreeing with the shape",
       Int4Tensors("BF16", "I64", {{"e.gate_proj.weight_shape", "I64", {2}, RawBytes(std::vector<int64_t>{4, 11})}}),
       Int4Quant(), "needs [4, 2]"},
      {"scales for another group size", Int4Tensors("BF16", "I64"), Int4Quant(8),
       "weight_scale: shape [2, 3], a [2, 11] matrix in groups of 8 columns needs [2, 2]"},
      {"integer scales", Int4Tensors("I32", "I64"), Int4Quant(), "weight_scale: dtype I32 is not a floating-point type"},
      {"a zero point (asymmetric)",
       Int4Tensors("BF16", "I64", {{"e.gate_proj.weight_zero_point", "I32", {1, 3}, WordBytes({0, 0, 0})}}), Int4Quant(),
       "e.gate_proj.weight_zero_point is present; only symmetric int4", Errc::kUnsupported},
      {"a column permutation",
       Int4Tensors("BF16", "I64", {{"e.gate_proj.weight_g_idx", "I32", {1}, WordBytes({0})}}), Int4Quant(),
       "e.gate_proj.weight_g_idx is present", Errc::kUnsupported},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.why);
    auto w = LoadInt4(c.tensors, c.q);
    ASSERT_FALSE(w);
    EXPECT_EQ(w.error().code(), c.code);
    EXPECT_NE(w.error().message().find(c.says), std::string::npos) << w.error().message();
    EXPECT_NE(w.error().message().find("e.gate_proj.weight"), std::string::npos) << w.error().message();
  }
  // Packed words fewer than the header's shape says (a truncated tensor)
  // are refused when the checkpoint is opened, naming the file and tensor.
  TempDir dir;
  WriteSafetensors(dir / "model.safetensors",
                   Int4Tensors("BF16", "I64", {{"e.gate_proj.weight_packed", "I32", {2, 2}, WordBytes({1, 2, 3})}}));
  auto ck = Checkpoint::Open(dir.path());
  ASSERT_FALSE(ck);
  EXPECT_NE(ck.error().message().find("e.gate_proj.weight_packed"), std::string::npos) << ck.error().message();
}

// quantization_config as Kimi-K2-Thinking ships it, and every change of a
// key the decoding depends on.
nlohmann::ordered_json K2ThinkingQuantConfig() {
  return nlohmann::ordered_json::parse(R"({
    "quant_method": "compressed-tensors", "format": "pack-quantized", "quantization_status": "compressed",
    "config_groups": {"group_0": {"targets": ["Linear"], "input_activations": null, "output_activations": null,
      "weights": {"num_bits": 4, "type": "int", "symmetric": true, "strategy": "group", "group_size": 32,
                  "dynamic": false, "actorder": null, "block_structure": null, "observer": "minmax"}}},
    "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*"], "kv_cache_scheme": null})");
}

TEST(ConvertQuantConfig, PackQuantizedInt4IsReadFromTheConfig) {
  auto q = ParseQuantizationConfig(K2ThinkingQuantConfig(), "config.json");
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_TRUE(q->int4_packed);
  EXPECT_EQ(q->int4_group, 32);
  EXPECT_FALSE(q->fp8_block_known);
  // The format given per group instead of at the top.
  nlohmann::ordered_json per_group = K2ThinkingQuantConfig();
  per_group.erase("format");
  per_group["config_groups"]["group_0"]["format"] = "pack-quantized";
  q = ParseQuantizationConfig(per_group, "config.json");
  ASSERT_TRUE(q) << q.error().message();
  EXPECT_TRUE(q->int4_packed);
  // Not pack-quantized: fp8 block scales, K3's MXFP4, nothing.
  for (const char* other : {R"({"quant_method": "fp8", "weight_block_size": [128, 64]})",
                            R"({"quant_method": "compressed-tensors", "format": "mxfp4-pack-quantized"})", "null"}) {
    q = ParseQuantizationConfig(nlohmann::ordered_json::parse(other), "config.json");
    ASSERT_TRUE(q) << other << ": " << q.error().message();
    EXPECT_FALSE(q->int4_packed) << other;
  }
  q = ParseQuantizationConfig(nlohmann::ordered_json::parse(R"({"weight_block_size": [128, 64]})"), "c");
  ASSERT_TRUE(q);
  EXPECT_EQ(q->fp8_block_cols, 64);
  // A second weight group with the same scheme is the same decoding.
  nlohmann::ordered_json two = K2ThinkingQuantConfig();
  two["config_groups"]["group_1"] = two["config_groups"]["group_0"];
  EXPECT_TRUE(ParseQuantizationConfig(two, "config.json"));
}

TEST(ConvertQuantConfig, PackQuantizedSchemesItCannotDecodeAreRefused) {
  struct Case {
    const char* patch;  // JSON merge patch on group_0's weights, or on the config with "/"
    const char* says;
    Errc code;
  };
  const std::vector<Case> cases = {
      {R"({"symmetric": false})", "weights.symmetric is false: only symmetric int4", Errc::kUnsupported},
      {R"({"num_bits": 8})", "weights.num_bits is 8: only 4-bit", Errc::kUnsupported},
      {R"({"type": "float"})", "weights.type is \"float\": only integer", Errc::kUnsupported},
      {R"({"strategy": "channel", "group_size": null})", "weights.strategy is \"channel\"", Errc::kUnsupported},
      {R"({"strategy": "channel"})", "weights.strategy is \"channel\": only \"group\"", Errc::kUnsupported},
      {R"({"strategy": "tensor_group"})", "weights.strategy is \"tensor_group\"", Errc::kUnsupported},
      {R"({"group_size": null})", "has no group_size", Errc::kFormat},
      {R"({"group_size": 0})", "weights.group_size is 0: not a positive number", Errc::kUnsupported},
      {R"({"group_size": -1})", "weights.group_size is -1", Errc::kUnsupported},
      {R"({"num_bits": null})", "has no num_bits", Errc::kFormat},
      {R"({"symmetric": null})", "has no symmetric", Errc::kFormat},
      {R"({"actorder": "group"})", "weights.actorder is \"group\"", Errc::kUnsupported},
      {R"({"dynamic": true})", "weights.dynamic is true", Errc::kUnsupported},
      {R"(/{"quant_method": "gptq"})", "quant_method is not \"compressed-tensors\"", Errc::kFormat},
      {R"(/{"config_groups": null})", "without config_groups", Errc::kFormat},
      {R"(/{"config_groups": {"group_0": {"weights": null}}})", "no config group quantizes weights", Errc::kFormat},
      {R"(/{"config_groups": {"group_1": {"targets": ["Linear"], "weights": {"num_bits": 4, "type": "int",
          "symmetric": true, "strategy": "group", "group_size": 128}}}})",
       "group_size 128 differs from another group's 32", Errc::kUnsupported},
      {R"(/{"config_groups": {"group_1": {"format": "float-quantized", "weights": {"num_bits": 8}}}})",
       "weights in format \"float-quantized\" beside pack-quantized ones", Errc::kUnsupported},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.patch);
    nlohmann::ordered_json qc = K2ThinkingQuantConfig();
    if (c.patch[0] == '/') {
      qc.merge_patch(nlohmann::ordered_json::parse(c.patch + 1));
    } else {
      qc["config_groups"]["group_0"]["weights"].merge_patch(nlohmann::ordered_json::parse(c.patch));
    }
    auto q = ParseQuantizationConfig(qc, "ckpt/config.json");
    ASSERT_FALSE(q);
    EXPECT_EQ(q.error().code(), c.code);
    EXPECT_NE(q.error().message().find(c.says), std::string::npos) << q.error().message();
    EXPECT_NE(q.error().message().find("ckpt/config.json: quantization_config"), std::string::npos)
        << q.error().message();
  }
}

std::vector<float> HeavyTailed(size_t n, uint32_t seed) {
  std::mt19937 g(seed);
  std::student_t_distribution<float> t(3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = 0.02f * t(g);
  return v;
}

TEST(ConvertTrunkQuant, MinimisedScalesBeatMaxScaling) {
  const int64_t cols = 1000;  // not a multiple of 128: a padded last group
  for (format::TensorFmt fmt : {format::TensorFmt::kQ4G, format::TensorFmt::kQ8G}) {
    double ours = 0, ref = 0;
    for (int r = 0; r < 64; ++r) {
      std::vector<float> x = HeavyTailed(cols, 7 + r);
      const format::TrunkGeometry g = format::ComputeTrunkGeometry(fmt, {1, cols}, kTrunkGroup);
      std::vector<uint8_t> p(g.row_bytes);
      std::vector<uint16_t> s(g.groups);
      QuantizeTrunkRow(fmt, x.data(), cols, p.data(), s.data());
      ours += TrunkRowError(fmt, x.data(), cols, p.data(), s.data());
      QuantizeTrunkRowMaxScale(fmt, x.data(), cols, p.data(), s.data());
      ref += TrunkRowError(fmt, x.data(), cols, p.data(), s.data());
    }
    // Q4G: clipping and the code -8 pay; Q8G: 254 levels leave little to gain.
    EXPECT_LT(ours, (fmt == format::TensorFmt::kQ4G ? 0.85 : 1.0) * ref) << "fmt " << int(fmt);
  }
}

// The residual rotation's two products (docs/CONVERT.md, "Residual
// rotation"): Q = D·H is orthonormal, a reader rotated on its input side
// times a writer rotated on its output side is the original product with
// the gain folded in, an outlier is spread evenly over its block, and on
// heavy-tailed rows the Q4G error falls.
TEST(ConvertResidualBasis, InputAndOutputSidesAreOneOrthonormalBasis) {
  const int64_t d = 384, block = 128;  // three blocks
  std::mt19937 g(11);
  std::normal_distribution<float> n01;
  std::vector<float> signs(d), gain(d);
  for (int64_t i = 0; i < d; ++i) signs[i] = (g() & 1) != 0 ? 1.0f : -1.0f, gain[i] = 0.5f + (g() % 100) / 100.0f;
  // Q itself: the identity rotated on its input side; Qᵀ on its output side.
  std::vector<float> q(d * d, 0.0f), qt(d * d, 0.0f);
  for (int64_t i = 0; i < d; ++i) q[i * d + i] = qt[i * d + i] = 1.0f;
  RotateInputSide(q.data(), d, d, nullptr, signs.data(), block);
  RotateOutputSide(qt.data(), d, d, signs.data(), block);
  double worst = 0;
  for (int64_t i = 0; i < d; ++i) {
    for (int64_t j = 0; j < d; ++j) {
      worst = std::max(worst, std::abs(static_cast<double>(qt[i * d + j]) - q[j * d + i]));
      double dot = 0;
      for (int64_t k = 0; k < d; ++k) dot += static_cast<double>(q[i * d + k]) * q[j * d + k];
      worst = std::max(worst, std::abs(dot - (i == j ? 1.0 : 0.0)));
    }
  }
  EXPECT_LT(worst, 1e-6);
  // Reader (5 × d) and writer (d × 7).
  std::vector<float> r(5 * d), w(d * 7);
  for (float& v : r) v = n01(g);
  for (float& v : w) v = n01(g);
  std::vector<float> r2 = r, w2 = w;
  RotateInputSide(r2.data(), 5, d, gain.data(), signs.data(), block);
  RotateOutputSide(w2.data(), d, 7, signs.data(), block);
  for (int i = 0; i < 5; ++i) {
    for (int j = 0; j < 7; ++j) {
      double want = 0, got = 0;
      for (int64_t k = 0; k < d; ++k) {
        want += static_cast<double>(r[i * d + k]) * gain[k] * w[k * 7 + j];
        got += static_cast<double>(r2[i * d + k]) * w2[k * 7 + j];
      }
      EXPECT_NEAR(got, want, 1e-4 * (1 + std::abs(want)));
    }
  }
  // One outlier: |x|/sqrt(block) on every entry of its block, nothing elsewhere.
  std::vector<float> one(d, 0.0f);
  one[200] = 8.0f;
  RotateInputSide(one.data(), 1, d, nullptr, signs.data(), block);
  for (int64_t i = 0; i < d; ++i) {
    EXPECT_NEAR(std::abs(one[i]), i / block == 200 / block ? 8.0 / std::sqrt(128.0) : 0.0, 1e-5) << i;
  }
}

TEST(ConvertResidualBasis, RotatedHeavyTailedRowsQuantiseBetter) {
  const int64_t d = 1024, rows = 64;
  std::vector<float> m = HeavyTailed(static_cast<size_t>(d * rows), 3), signs(d);
  std::mt19937 g(5);
  for (float& s : signs) s = (g() & 1) != 0 ? 1.0f : -1.0f;
  auto q4g_error = [&](const std::vector<float>& x) {
    const format::TrunkGeometry geo = format::ComputeTrunkGeometry(format::TensorFmt::kQ4G, {1, d}, kTrunkGroup);
    std::vector<uint8_t> p(geo.row_bytes);
    std::vector<uint16_t> s(geo.groups);
    double err = 0, norm = 0;
    for (int64_t r = 0; r < rows; ++r) {
      QuantizeTrunkRow(format::TensorFmt::kQ4G, x.data() + r * d, d, p.data(), s.data());
      err += TrunkRowError(format::TensorFmt::kQ4G, x.data() + r * d, d, p.data(), s.data());
      for (int64_t i = 0; i < d; ++i) norm += static_cast<double>(x[r * d + i]) * x[r * d + i];
    }
    return std::sqrt(err / norm);
  };
  const double before = q4g_error(m);
  RotateInputSide(m.data(), rows, d, nullptr, signs.data(), 256);
  const double after = q4g_error(m);
  std::printf("Q4G relative error of Student-t(3) rows: %.2f%% as they are, %.2f%% rotated\n", 100 * before,
              100 * after);
  EXPECT_LT(after, 0.75 * before);
}

// Where the rotation cannot apply, the plan is the identity and says why.
TEST(ConvertResidualBasis, SkippedWithAReasonForAVisionTowerOrAnOddWidth) {
  TempDir dir;
  WriteSafetensors(dir / "model.safetensors", {{"b", "F32", {}, std::vector<uint8_t>{0, 0, 0x80, 0x3F}}});
  auto ck = Checkpoint::Open(dir.path());
  ASSERT_TRUE(ck) << ck.error().message();
  SourceModel sm;
  ModelConfig cfg;
  cfg.hidden = 96;  // 32 · 3: a block of 32 would do, but the vision tower comes first
  sm.trunk.push_back({"vision_tower.patch_embed.weight", "vision_tower.patch_embed.weight", true});
  auto vision = ResidualBasis::Plan(**ck, sm, cfg, 1);
  ASSERT_TRUE(vision) << vision.error().message();
  EXPECT_FALSE(vision->enabled());
  EXPECT_NE(vision->why_not().find("vision"), std::string::npos) << vision->why_not();
  sm.trunk.clear();
  cfg.hidden = 3 * 16;  // no power-of-two factor of 32
  auto odd = ResidualBasis::Plan(**ck, sm, cfg, 1);
  ASSERT_TRUE(odd) << odd.error().message();
  EXPECT_FALSE(odd->enabled());
  EXPECT_NE(odd->why_not().find("48"), std::string::npos) << odd->why_not();
  // The identity leaves every tensor alone.
  F32Tensor t{{2, 48}, std::vector<float>(96, 2.0f)};
  EXPECT_TRUE(odd->ApplyToTrunk("model.norm.weight", &t).ok());
  EXPECT_EQ(t.values, std::vector<float>(96, 2.0f));
}

TEST(ConvertTrunkQuant, PaddingEncodesZero) {
  std::vector<float> x(130, 0.5f);
  std::vector<uint8_t> p(128);
  std::vector<uint16_t> s(2);
  QuantizeTrunkRow(format::TensorFmt::kQ4G, x.data(), 130, p.data(), s.data());
  for (int64_t i = 130; i < 256; ++i) EXPECT_EQ(format::TrunkCode(format::TensorFmt::kQ4G, p.data(), i), 0);
  // Only the f16 rounding of the scale is lost: 7 x f16(0.5/7) = 0.49988.
  EXPECT_NEAR(TrunkRowError(format::TensorFmt::kQ4G, x.data(), 130, p.data(), s.data()), 0.0, 1e-5);
}

TEST(ConvertKmeans, SameBooksAtAnyThreadCountAndEveryEntryUsed) {
  std::vector<float> data = HeavyTailed(20000 * kVecDim, 3);
  KmeansOptions o;
  o.entries = 64;
  o.stages = 2;
  o.max_iterations = 8;
  o.seed = 42;
  std::vector<std::vector<float>> books;
  for (int threads : {1, 2, 3}) {
    auto pool = ThreadPool::Create(threads);
    ASSERT_TRUE(pool);
    std::vector<float> v = data;
    KmeansReport rep;
    books.push_back(TrainResidualBooks(v, o, pool->get(), &rep));
    ASSERT_EQ(rep.stage_error.size(), 2u);
    EXPECT_LT(rep.stage_error[1], rep.stage_error[0]);
  }
  EXPECT_EQ(books[0], books[1]);
  EXPECT_EQ(books[0], books[2]);
  // Every value is what the engine decodes (f16, subnormals flushed).
  for (float b : books[0]) EXPECT_EQ(b, RoundBookValue(b));
  // No dead entry in the first stage.
  std::vector<int> used(64, 0);
  BookSearch s(books[0].data(), 64);
  for (size_t i = 0; i < data.size() / kVecDim; ++i) used[s.Nearest(data.data() + i * kVecDim)] = 1;
  for (int c = 0; c < 64; ++c) EXPECT_EQ(used[c], 1) << c;
}

// Greedy residual encoding of every vector (stage 0 nearest of x, stage s
// nearest of what the earlier stages leave), the encoder's way, written
// independently of vq.cc: the weighted sum of squared residuals.
double GreedyError(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& books,
                   int stages, int k) {
  std::vector<BookSearch> search;
  for (int s = 0; s < stages; ++s) search.emplace_back(books.data() + static_cast<size_t>(s) * k * kVecDim, k);
  double total = 0;
  for (size_t i = 0; i < x.size() / kVecDim; ++i) {
    float r[kVecDim];
    std::copy_n(x.data() + i * kVecDim, kVecDim, r);
    for (int s = 0; s < stages; ++s) {
      const float* c = search[s].entry(search[s].Nearest(r));
      for (int j = 0; j < kVecDim; ++j) r[j] -= c[j];
    }
    double d = 0;
    for (float v : r) d += static_cast<double>(v) * v;
    total += w[i] * d;
  }
  return total;
}

TEST(ConvertKmeans, RefinementNeverRaisesTheGreedyErrorAndIsDeterministic) {
  const size_t n = 20000;
  std::vector<float> data = HeavyTailed(n * kVecDim, 5);
  // Weights like the squares of row scales: spread over two orders of magnitude.
  std::vector<float> w(n);
  std::mt19937 g(9);
  std::uniform_real_distribution<float> u(-2.3f, 2.3f);
  for (float& v : w) v = std::exp(u(g));
  KmeansOptions o;
  o.entries = 64;
  o.stages = 3;
  o.max_iterations = 6;
  o.seed = 7;
  std::vector<float> greedy_v = data;
  KmeansReport greedy_rep;
  const std::vector<float> greedy = TrainResidualBooks(greedy_v, o, nullptr, &greedy_rep, w.data());
  EXPECT_TRUE(greedy_rep.refine_error.empty());
  const double before = GreedyError(data, w, greedy, 3, 64);
  o.refine_rounds = 3;
  std::vector<std::vector<float>> books, residuals;
  for (int threads : {1, 2}) {
    auto pool = ThreadPool::Create(threads);
    ASSERT_TRUE(pool);
    std::vector<float> v = data;
    KmeansReport rep;
    books.push_back(TrainResidualBooks(v, o, pool->get(), &rep, w.data()));
    residuals.push_back(v);
    // Refinement starts where the greedy training ended, and reports it.
    ASSERT_GE(rep.refine_error.size(), 2u);
    EXPECT_NEAR(rep.refine_error[0], before / n, 1e-9 * before / n);
    EXPECT_GE(rep.refine_kept, 1);
    EXPECT_LE(static_cast<size_t>(rep.refine_kept) + 1, rep.refine_error.size());
    for (int r = 1; r <= rep.refine_kept; ++r) EXPECT_LT(rep.refine_error[r], rep.refine_error[r - 1]) << r;
  }
  // The same books and residuals at any thread count.
  EXPECT_EQ(books[0], books[1]);
  EXPECT_EQ(residuals[0], residuals[1]);
  // Every value is what the engine decodes (f16, subnormals flushed).
  for (float b : books[0]) EXPECT_EQ(b, RoundBookValue(b));
  // The greedy encoding of the refined books is better than of the unrefined ones.
  const double after = GreedyError(data, w, books[0], 3, 64);
  EXPECT_LT(after, before);
  std::printf("weighted greedy training error: %.6g before refinement, %.6g after (%.2f%% lower)\n", before / n,
              after / n, 100 * (1 - after / before));
  // The returned residual is that greedy encoding's.
  double resid = 0;
  for (size_t i = 0; i < n; ++i) {
    double d = 0;
    for (int j = 0; j < kVecDim; ++j) d += static_cast<double>(residuals[0][i * kVecDim + j]) * residuals[0][i * kVecDim + j];
    resid += w[i] * d;
  }
  EXPECT_NEAR(resid, after, 1e-9 * after);
  // The reference recipe never refines.
  o.reference = true;
  std::vector<float> v = data;
  KmeansReport rep;
  TrainResidualBooks(v, o, nullptr, &rep, w.data());
  EXPECT_TRUE(rep.refine_error.empty());
}

TEST(ConvertKmeans, NearestMatchesBruteForce) {
  std::vector<float> book = HeavyTailed(256 * kVecDim, 11);
  std::vector<float> x = HeavyTailed(500 * kVecDim, 12);
  BookSearch s(book.data(), 256);
  int agree = 0;
  for (int i = 0; i < 500; ++i) {
    int best = 0;
    double bd = 1e30;
    for (int c = 0; c < 256; ++c) {
      double d = 0;
      for (int j = 0; j < kVecDim; ++j) d += std::pow(double(x[i * 8 + j]) - book[c * 8 + j], 2);
      if (d < bd) {
        bd = d;
        best = c;
      }
    }
    agree += s.Nearest(x.data() + i * 8) == best;
  }
  EXPECT_GE(agree, 498);  // the expanded form may differ on exact near-ties only
}

}  // namespace
}  // namespace waste::convert
