// Container::Open on the fixtures: shapes, the values FORMAT.md §12 works
// out (trunk rows, codebooks, expert rows reconstructed from codebooks,
// indices and scales), record checks, and damaged copies refused with a
// message that names what is wrong.
#include "container/container.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "container_test_util.h"
#include "format/format.h"
#include "platform/platform.h"
#include "container/tensor_list.h"
#include "shared_fixtures.h"

namespace waste {
namespace {

using nlohmann::ordered_json;
using testing::FixtureCopy;
using testing::FixtureDir;
using testing::ReadFile;

std::unique_ptr<Container> OpenOrDie(const std::string& dir, ContainerOptions options = {}) {
  Result<std::unique_ptr<Container>> c = Container::Open(dir, options);
  EXPECT_TRUE(c.has_value()) << c.error().ToString();
  return c.has_value() ? std::move(*c) : nullptr;
}

void ExpectFloats(const float* got, std::initializer_list<double> want, double tol,
                  const std::string& what) {
  size_t i = 0;
  for (double w : want) {
    EXPECT_NEAR(got[i], w, tol) << what << "[" << i << "]";
    ++i;
  }
}

// A record's failure carries the record as data (Status::failed_expert),
// with the same code and the words users read; nothing else does.
TEST(RecordError, NamesTheRecordAsDataAndInWords) {
  Status st = RecordError(3, 17, IoError("checksum mismatch"));
  EXPECT_EQ(st.code(), Errc::kIo);
  EXPECT_EQ(st.message(), "expert 17 of layer 3: checksum mismatch");
  ASSERT_TRUE(st.failed_expert().has_value());
  EXPECT_EQ(*st.failed_expert(), (ExpertFailureInfo{3, 17}));
  Status copy = st;  // survives being passed along
  EXPECT_EQ(copy.failed_expert(), st.failed_expert());
  EXPECT_TRUE(RecordError(3, 17, Status::Ok()).ok());
  EXPECT_FALSE(RecordError(3, 17, Status::Ok()).failed_expert().has_value());
  EXPECT_FALSE(IoError("short read").failed_expert().has_value());
  EXPECT_FALSE(Status::Ok().failed_expert().has_value());
}

TEST(ContainerOpen, BothFixturesOpenWithTheirShapes) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  for (const auto& [set, vocab] : {std::pair{"warp-tiny", 256}, std::pair{"warp-tiny-tok", 316}}) {
    auto c = OpenOrDie(FixtureDir(set));
    ASSERT_NE(c, nullptr);
    const ModelConfig& cfg = c->config();
    EXPECT_EQ(cfg.n_layers, 4);
    EXPECT_EQ(cfg.moe.n_experts, 8);
    EXPECT_EQ(cfg.moe.top_k, 2);
    EXPECT_EQ(cfg.hidden, 128);
    EXPECT_EQ(cfg.vocab, vocab);
    EXPECT_EQ(c->codebook_count(), 27);
    EXPECT_EQ(c->max_record_bytes(), 12288u);
    EXPECT_FALSE(c->is_moe_layer(0));
    for (int l = 1; l < 4; ++l) {
      ASSERT_TRUE(c->is_moe_layer(l));
      EXPECT_EQ(c->bank(l).codebook_base, 9 * (l - 1));
      EXPECT_EQ(c->bank_file(l).size(), 98304u);
    }
    // Every tensor the engine uses is there with its shape.
    for (const TensorSpec& spec : ModelTensors(cfg)) {
      const TensorView* t = c->Find(spec.name);
      ASSERT_NE(t, nullptr) << spec.name;
      EXPECT_EQ(t->elements(), spec.elements()) << spec.name;
      if (spec.kind == TensorKind::kMatrix) {
        EXPECT_EQ(t->rows, spec.shape[0]) << spec.name;
        EXPECT_EQ(t->cols, spec.shape[1]) << spec.name;
      }
    }
    EXPECT_EQ(c->FindLayer(2, "self_attn.kv_b_proj.weight"),
              c->Find("model.layers.2.self_attn.kv_b_proj.weight"));
    EXPECT_EQ(c->Find("model.layers.2.self_attn.q_a_proj.weight"), nullptr);
    // The quantized embedding stays on disk: findable, no data.
    const TensorView* embed = c->Find("model.embed_tokens.weight");
    ASSERT_NE(embed, nullptr);
    EXPECT_EQ(embed->data, nullptr);
    EXPECT_EQ(embed->fmt, TensorFmt::kQ8G);
  }
}

TEST(ContainerOpen, ResidentBytesEqualThePlanFormula) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  auto c = OpenOrDie(FixtureDir("warp-tiny"));
  ASSERT_NE(c, nullptr);
  Result<Manifest> m = ParseManifest(ReadFile(FixtureDir("warp-tiny") + "/manifest.json"));
  ASSERT_TRUE(m.has_value());
  EXPECT_EQ(c->resident_trunk_bytes(), ResidentTrunkBytes(*m));
  // 352872 payload bytes (everything but the embedding), plus alignment.
  EXPECT_GE(c->resident_trunk_bytes(), 352872u);
  EXPECT_LE(c->resident_trunk_bytes(), 352872u + 2 * 64 * 78);
}

TEST(ContainerValues, TrunkRowsOfTheWorkedExample) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  auto c = OpenOrDie(FixtureDir("warp-tiny"));
  ASSERT_NE(c, nullptr);
  std::vector<float> row(256);
  // Q8G embedding row 0: 89, -29 times f16 0x1C6C.
  ASSERT_TRUE(c->ReadEmbeddingRow(0, row.data()).ok());
  EXPECT_FLOAT_EQ(row[0], 89 * 0.0043182373046875f);
  EXPECT_FLOAT_EQ(row[1], -29 * 0.0043182373046875f);
  ExpectFloats(row.data(), {0.38432312, -0.12522888}, 1e-7, "embed");
  // F32 input_layernorm.
  const TensorView* ln = c->Find("model.layers.0.input_layernorm.weight");
  ASSERT_NE(ln, nullptr);
  EXPECT_FLOAT_EQ(ln->f32()[0], 0.30144486f);
  // Q4G q_proj row 0: nibbles 0xA, 0x6 => 2, -2 times f16 0x225C.
  const TensorView* q = c->Find("model.layers.0.self_attn.q_proj.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->fmt, TensorFmt::kQ4G);
  DequantizeRow(*q, 0, row.data());
  EXPECT_EQ(row[0], 0.02484130859375f);
  EXPECT_EQ(row[1], -0.02484130859375f);
  // b_proj and lm_head are where the worked example puts them.
  const TensorView* b = c->Find("model.layers.0.self_attn.b_proj.weight");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->info->off, 59648u);
  EXPECT_EQ(b->info->scale_off, 59904u);
  EXPECT_EQ(c->Find("lm_head.weight")->info->scale_off, 385640u);
  // Out-of-range tokens are refused, not read.
  EXPECT_EQ(c->ReadEmbeddingRow(256, row.data()).code(), Errc::kArg);
  EXPECT_EQ(c->ReadEmbeddingRow(-1, row.data()).code(), Errc::kArg);
}

TEST(ContainerValues, EveryTrunkRowDequantizes) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  auto c = OpenOrDie(FixtureDir("warp-tiny"));
  ASSERT_NE(c, nullptr);
  std::string trunk = ReadFile(FixtureDir("warp-tiny") + "/trunk.bin");
  std::vector<float> row;
  for (const TensorInfo& info : c->trunk_index()) {
    if (info.name == "model.embed_tokens.weight") continue;
    const TensorView* t = c->Find(info.name);
    ASSERT_NE(t, nullptr) << info.name;
    row.resize(static_cast<size_t>(t->cols));
    for (int64_t r = 0; r < t->rows; ++r) {
      DequantizeRow(*t, r, row.data());
      // Independent decode straight from the file bytes (§4.3-4.4).
      const uint8_t* file = reinterpret_cast<const uint8_t*>(trunk.data());
      for (int64_t i = 0; i < t->cols; ++i) {
        float want;
        if (info.fmt == TensorFmt::kF32) {
          std::memcpy(&want, file + info.off + 4 * (r * t->cols + i), 4);
        } else {
          const uint8_t* rowp = file + info.off + r * t->row_bytes;
          int code = info.fmt == TensorFmt::kQ8G ? static_cast<int8_t>(rowp[i])
                                                  : ((i & 1) ? rowp[i / 2] >> 4 : rowp[i / 2] & 15) - 8;
          uint16_t s;
          std::memcpy(&s, file + info.scale_off + 2 * (r * t->groups + i / 128), 2);
          want = format::F16ToF32(s) * static_cast<float>(code);
        }
        ASSERT_EQ(row[i], want) << info.name << " row " << r << " col " << i;
      }
    }
  }
}

TEST(ContainerValues, CodebookRecordZero) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  std::string books = ReadFile(FixtureDir("warp-tiny") + "/codebooks.bin");
  const uint8_t header[16] = {0x57, 0x43, 0x42, 0x4B, 0x00, 0x00, 0x04, 0x08,
                              0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
  EXPECT_EQ(std::memcmp(books.data(), header, 16), 0);
  EXPECT_EQ(static_cast<uint8_t>(books[4112 + 4]), 1);  // record 1 carries id 1
  auto c = OpenOrDie(FixtureDir("warp-tiny"));
  ASSERT_NE(c, nullptr);
  ExpectFloats(c->Codebook(0) + 196 * 8,
               {-0.06915283, -0.09344482, 0.28027344, -0.23254395, -0.16625977, -0.12854004,
                0.18444824, 0.20410156},
               1e-8, "C0[196]");
  ExpectFloats(c->Codebook(1) + 248 * 8,
               {-0.18627930, 0.26855469, 0.04202271, 0.16589355, 0.25122070, 0.20544434,
                -0.12487793, -0.03472900},
               1e-8, "C1[248]");
  ExpectFloats(c->Codebook(2) + 163 * 8,
               {0.22058105, 0.12048340, 0.04550171, 0.07702637, 0.26538086, -0.27685547,
                -0.05606079, -0.09771729},
               1e-8, "C2[163]");
  EXPECT_EQ(c->Codebook(27), nullptr);
  EXPECT_EQ(c->Codebook(-1), nullptr);
}

class ExpertRecordTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WASTE_SKIP_WITHOUT_FIXTURES();
    c_ = OpenOrDie(FixtureDir("warp-tiny"));
    ASSERT_NE(c_, nullptr);
    bank_ = ReadFile(FixtureDir("warp-tiny") + "/experts-L1.bin");
  }
  const uint8_t* Record(int e) const {
    return reinterpret_cast<const uint8_t*>(bank_.data()) + 12288 * e;
  }
  std::unique_ptr<Container> c_;
  std::string bank_;
};

TEST_F(ExpertRecordTest, GateRow0AndDownRow100OfTheWorkedExample) {
  Result<ExpertRecordView> v = c_->ParseRecord(1, 0, Record(0), true);
  ASSERT_TRUE(v.has_value()) << v.error().ToString();
  EXPECT_EQ(v->gate - Record(0), 48);
  EXPECT_EQ(v->up - Record(0), 3120);
  EXPECT_EQ(v->down - Record(0), 6192);
  EXPECT_EQ(reinterpret_cast<const uint8_t*>(v->scale_gate) - Record(0), 9264);
  EXPECT_EQ(v->scale_gate[0], 0x289E);
  EXPECT_EQ(v->scale_down[100], format::F32ToF16(0.04052734375f));
  EXPECT_EQ(v->gate[0], 0xC4);
  EXPECT_EQ(v->gate[1], 0xF8);
  EXPECT_EQ(v->gate[2], 0xA3);
  EXPECT_EQ(v->codebook_id, 0);

  std::vector<float> row(128);
  c_->DequantizeExpertRow(*v, format::kGate, 0, row.data());
  ExpectFloats(row.data(),
               {-0.0012571, 0.0106626, 0.0132671, 0.0003743, 0.0126375, -0.0072126, 0.0001266,
                0.0025847},
               5e-7, "W_gate[0, 0:8]");
  // Independently: scale * (C0[196] + C1[248] + C2[163]).
  for (int j = 0; j < 8; ++j) {
    float sum = c_->Codebook(0)[196 * 8 + j] + c_->Codebook(1)[248 * 8 + j] +
                c_->Codebook(2)[163 * 8 + j];
    EXPECT_EQ(row[j], 0.03607177734375f * sum);
  }
  // Down row 100, vector 3: run at 8412 = 80 B5 71 into records 6, 7, 8.
  EXPECT_EQ(Record(0)[8412], 0x80);
  EXPECT_EQ(Record(0)[8413], 0xB5);
  EXPECT_EQ(Record(0)[8414], 0x71);
  c_->DequantizeExpertRow(*v, format::kDown, 100, row.data());
  ExpectFloats(row.data() + 24,
               {0.0209365, -0.0111905, -0.0165749, -0.0029980, 0.0086328, 0.0006567, -0.0059317,
                -0.0084176},
               5e-7, "W_down[100, 24:32]");
  for (int j = 0; j < 8; ++j) {
    float sum = c_->Codebook(6)[128 * 8 + j] + c_->Codebook(7)[181 * 8 + j] +
                c_->Codebook(8)[113 * 8 + j];
    EXPECT_EQ(row[24 + j], 0.04052734375f * sum);
  }
}

TEST_F(ExpertRecordTest, EveryRecordOfEveryBankParsesWithCrc) {
  for (int layer = 1; layer < 4; ++layer) {
    const platform::File& f = c_->bank_file(layer);
    platform::AlignedPtr<uint8_t> buf(
        static_cast<uint8_t*>(platform::AlignedAlloc(4096, c_->bank(layer).record_bytes)));
    for (int e = 0; e < 8; ++e) {
      ASSERT_TRUE(f.ReadAt(static_cast<uint64_t>(e) * 12288, buf.get(), 12288).ok());
      Result<ExpertRecordView> v = c_->ParseRecord(layer, e, buf.get(), true);
      ASSERT_TRUE(v.has_value()) << v.error().ToString();
      EXPECT_EQ(v->codebook_id, 9 * (layer - 1));
    }
  }
}

TEST_F(ExpertRecordTest, WrongIdsAndDamageAreRefused) {
  Result<ExpertRecordView> v = c_->ParseRecord(1, 1, Record(0), false);
  ASSERT_FALSE(v.has_value());
  EXPECT_EQ(v.error().code(), Errc::kIo);
  EXPECT_NE(v.error().message().find("expert 1 of layer 1: record header is not what the bank "
                                     "index describes: expert_id 0"),
            std::string::npos)
      << v.error().message();
  EXPECT_FALSE(c_->ParseRecord(2, 0, Record(0), false).has_value());
  EXPECT_FALSE(c_->ParseRecord(0, 0, Record(0), false).has_value());  // dense layer
  EXPECT_FALSE(c_->ParseRecord(1, 8, Record(0), false).has_value());
  EXPECT_FALSE(c_->ParseRecord(1, -1, Record(0), false).has_value());

  std::string damaged = bank_;
  damaged[5000] ^= 0x10;  // payload bit: only the CRC notices
  const uint8_t* rec = reinterpret_cast<const uint8_t*>(damaged.data());
  EXPECT_TRUE(c_->ParseRecord(1, 0, rec, false).has_value());
  v = c_->ParseRecord(1, 0, rec, true);
  ASSERT_FALSE(v.has_value());
  EXPECT_NE(v.error().message().find("expert 0 of layer 1: checksum mismatch"), std::string::npos)
      << v.error().message();
}

// Opens a damaged copy and expects a refusal naming `needle`.
void ExpectOpenRefused(const FixtureCopy& copy, Errc code, const std::string& needle) {
  Result<std::unique_ptr<Container>> c = Container::Open(copy.path());
  ASSERT_FALSE(c.has_value()) << "opened; expected: " << needle;
  EXPECT_EQ(c.error().code(), code) << c.error().ToString();
  EXPECT_NE(c.error().message().find(needle), std::string::npos)
      << "message: " << c.error().message() << "\nexpected: " << needle;
}

TEST(DamagedCopies, ManifestDamage) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  struct Case {
    std::function<void(ordered_json&)> mutate;
    const char* needle;
  } cases[] = {
      {[](ordered_json& j) { j["format_version"] = 1; }, "format version mismatch"},
      {[](ordered_json& j) { j.erase("format_version"); }, "format version missing"},
      {[](ordered_json& j) { j["config"]["hidden_size"] = 1000000000; }, "hidden_size"},
      {[](ordered_json& j) { j["config"]["num_experts"] = 1 << 30; }, "num_experts"},
      {[](ordered_json& j) {
         j["config"]["mla_use_nope"] = false;
         j["config"]["rope_scaling"] = {{"type", "linear"}, {"factor", 8}};
       },
       "not implemented, only yarn"},
      {[](ordered_json& j) {
         j["config"]["mla_use_nope"] = false;
         j["config"]["rope_scaling"] = {{"type", "yarn"}, {"factor", 8}, {"mscale", 0.707},
                                        {"mscale_all_dim", 1.0}};
       },
       "mscale"},
      {[](ordered_json& j) { j["config"]["mla_use_nope"] = "yes"; }, "not true or false"},
      {[](ordered_json& j) { j["layers"]["2"]["file"] = "../experts-L2.bin"; }, "layers.\"2\""},
      {[](ordered_json& j) { j["layers"]["3"]["codebook_base"] = 19; }, "codebook_base 19"},
      {[](ordered_json& j) { j["trunk"][5]["name"] = "renamed"; },
       "required tensor is missing or has the wrong shape: model.layers.0.self_attn.v_proj.weight"},
  };
  for (const Case& c : cases) {
    FixtureCopy copy;
    ordered_json j = copy.Manifest();
    c.mutate(j);
    copy.SetManifest(j);
    ExpectOpenRefused(copy, Errc::kFormat, c.needle);
  }
}

TEST(DamagedCopies, FileDamage) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  {
    FixtureCopy copy;
    copy.Truncate("experts-L2.bin", 4096);
    ExpectOpenRefused(copy, Errc::kIo, "experts-L2.bin: short read");
  }
  {
    FixtureCopy copy;
    std::filesystem::remove(copy / "experts-L3.bin");
    ExpectOpenRefused(copy, Errc::kIo, "experts-L3.bin");
  }
  {
    FixtureCopy copy;
    copy.Truncate("trunk.bin", 100);  // lm_head scales now run past the end
    ExpectOpenRefused(copy, Errc::kIo, "lm_head.weight");
  }
  {
    FixtureCopy copy;
    ordered_json j = copy.Manifest();
    j["trunk"][4]["off"] = 386100;
    copy.SetManifest(j);
    ExpectOpenRefused(copy, Errc::kIo, "k_proj.weight");
  }
  {
    FixtureCopy copy;
    copy.Truncate("codebooks.bin", 4112 + 1);  // 25 whole records left, layer 3 needs 27
    ExpectOpenRefused(copy, Errc::kFormat, "codebooks.bin holds 25");
  }
  {
    FixtureCopy copy;
    std::filesystem::remove(copy / "manifest.json");
    ExpectOpenRefused(copy, Errc::kIo, "manifest.json");
  }
  {
    FixtureCopy copy;
    testing::WriteFile(copy / "manifest.json", "{\"format_version\": 0, \"config\": ");
    ExpectOpenRefused(copy, Errc::kFormat, "not valid JSON");
  }
}

TEST(DamagedCopies, RecordDamageIsRefusedOnRead) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  // Record headers are not read at open (FORMAT.md §8.1): a flipped header
  // byte or a wrong magic surfaces when the record is read.
  struct Case {
    size_t offset;
    uint8_t mask;
    const char* needle;
  } cases[] = {{0, 0xFF, "magic"}, {1, 0x01, "magic"}, {4, 0x02, "layer"},
               {16, 0x01, "rec_4k_blocks"}, {28, 0x40, "down_off"}};
  for (const Case& c : cases) {
    FixtureCopy copy;
    copy.FlipByte("experts-L1.bin", 12288 * 3 + c.offset, c.mask);
    auto container = OpenOrDie(copy.path());
    ASSERT_NE(container, nullptr);
    const platform::File& f = container->bank_file(1);
    platform::AlignedPtr<uint8_t> buf(static_cast<uint8_t*>(platform::AlignedAlloc(4096, 12288)));
    ASSERT_TRUE(f.ReadAt(12288 * 3, buf.get(), 12288).ok());
    Result<ExpertRecordView> v = container->ParseRecord(1, 3, buf.get(), false);
    ASSERT_FALSE(v.has_value()) << c.needle;
    EXPECT_NE(v.error().message().find("expert 3 of layer 1: record header is not what the bank "
                                       "index describes"),
              std::string::npos);
    EXPECT_NE(v.error().message().find(c.needle), std::string::npos) << v.error().message();
    // The neighbours are fine.
    ASSERT_TRUE(f.ReadAt(12288 * 2, buf.get(), 12288).ok());
    EXPECT_TRUE(container->ParseRecord(1, 2, buf.get(), true).has_value());
  }
}

TEST(ContainerOpen, BufferedBanksWhenDirectIoIsOff) {
  WASTE_SKIP_WITHOUT_FIXTURES();
  ContainerOptions options;
  options.direct_io = false;
  auto c = OpenOrDie(FixtureDir("warp-tiny"), options);
  ASSERT_NE(c, nullptr);
  EXPECT_FALSE(c->direct_io());
  std::vector<uint8_t> buf(12288);
  ASSERT_TRUE(c->bank_file(2).ReadAt(12288, buf.data(), buf.size()).ok());
  EXPECT_TRUE(c->ParseRecord(2, 1, buf.data(), true).has_value());
}

TEST(ContainerOpen, MissingDirectory) {
  Result<std::unique_ptr<Container>> c = Container::Open("/nonexistent/waste/container");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code(), Errc::kIo);
}

}  // namespace
}  // namespace waste
