// format.h: f16, crc32, VQ4P, trunk and record geometry, record header
// checks, against the numbers FORMAT.md works out.
#include "format/format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "container_test_util.h"
#include "shared_fixtures.h"

namespace waste::format {
namespace {

TEST(F16, DecodesTheSpecScales) {
  EXPECT_EQ(F16ToF32(0x1C6C), 0.0043182373046875f);
  EXPECT_EQ(F16ToF32(0x225C), 0.012420654296875f);
  EXPECT_EQ(F16ToF32(0x289E), 0.03607177734375f);
  EXPECT_EQ(F16ToF32(0x3C00), 1.0f);
  EXPECT_EQ(F16ToF32(0xC000), -2.0f);
  EXPECT_EQ(F16ToF32(0x7BFF), 65504.0f);
  EXPECT_TRUE(std::isinf(F16ToF32(0x7C00)));
}

TEST(F16, SubnormalsExactOrFlushed) {
  EXPECT_EQ(F16ToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x03FF), 1023 * std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32(0x8001), -std::ldexp(1.0f, -24));
  EXPECT_EQ(F16ToF32Flush(0x0001), 0.0f);
  EXPECT_TRUE(std::signbit(F16ToF32Flush(0x8001)));
  EXPECT_EQ(F16ToF32Flush(0x0400), std::ldexp(1.0f, -14));  // smallest normal kept
}

TEST(F16, EncodeRoundTripsEveryValue) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    uint16_t v = static_cast<uint16_t>(h);
    if ((v & 0x7C00) == 0x7C00 && (v & 0x3FF) != 0) continue;  // NaN payloads
    ASSERT_EQ(F32ToF16(F16ToF32(v)), v) << std::hex << h;
  }
}

TEST(F16, EncodeRoundsHalfToEven) {
  // 1 + 2^-11 is halfway between 1 and 1 + 2^-10: ties to even (1).
  EXPECT_EQ(F32ToF16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);
  // 1 + 3*2^-11 is halfway between 1+2^-10 and 1+2^-9: ties to even (1+2^-9).
  EXPECT_EQ(F32ToF16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(F32ToF16(1e6f), 0x7C00);                 // overflow to inf
  EXPECT_EQ(F32ToF16(65519.0f), 0x7BFF);             // rounds down to max
  EXPECT_EQ(F32ToF16(std::ldexp(1.0f, -25)), 0x0000);        // tie to even zero
  EXPECT_EQ(F32ToF16(1.5f * std::ldexp(1.0f, -25)), 0x0001);
}

TEST(Crc32, CheckValues) {
  auto crc = [](const std::string& s) {
    return Crc32(reinterpret_cast<const uint8_t*>(s.data()), s.size());
  };
  EXPECT_EQ(crc(""), 0u);
  EXPECT_EQ(crc("a"), 0xE8B7BE43u);
  EXPECT_EQ(crc("123456789"), 0xCBF43926u);
  EXPECT_EQ(crc("The quick brown fox jumps over the lazy dog"), 0x414FA339u);
}

TEST(Vq4p, PacksTheSpecExample) {
  const uint8_t s[4] = {5, 63, 1, 42};
  uint8_t b[3];
  PackVq4p(s, b);
  EXPECT_EQ(b[0], 0xC5);
  EXPECT_EQ(b[1], 0x1F);
  EXPECT_EQ(b[2], 0xA8);
  uint8_t back[4];
  UnpackVq4p(b, back);
  EXPECT_EQ(std::memcmp(s, back, 4), 0);
}

TEST(Vq4p, EveryByteTripleDecodesAndRepacks) {
  for (uint32_t w = 0; w < (1u << 24); w += 4093) {
    uint8_t b[3] = {static_cast<uint8_t>(w), static_cast<uint8_t>(w >> 8),
                    static_cast<uint8_t>(w >> 16)};
    uint8_t s[4];
    UnpackVq4p(b, s);
    for (int i = 0; i < 4; ++i) {
      ASSERT_LT(s[i], 64);
      ASSERT_EQ(s[i], (w >> (6 * i)) & 63);
    }
    uint8_t again[3];
    PackVq4p(s, again);
    ASSERT_EQ(std::memcmp(b, again, 3), 0);
  }
}

TEST(TrunkGeometry, MatchesTheWorkedExample) {
  TrunkGeometry q = ComputeTrunkGeometry(TensorFmt::kQ4G, {128, 128}, 128);
  EXPECT_EQ(q.row_bytes, 64u);
  EXPECT_EQ(q.payload_bytes + q.scale_bytes, 8448u);
  TrunkGeometry b = ComputeTrunkGeometry(TensorFmt::kQ4G, {4, 128}, 128);
  EXPECT_EQ(b.payload_bytes, 256u);
  EXPECT_EQ(b.scale_bytes, 8u);
  TrunkGeometry e = ComputeTrunkGeometry(TensorFmt::kQ8G, {256, 128}, 128);
  EXPECT_EQ(e.payload_bytes, 32768u);
  EXPECT_EQ(e.payload_bytes + e.scale_bytes, 33280u);
  TrunkGeometry f = ComputeTrunkGeometry(TensorFmt::kF32, {128, 1, 4}, 128);
  EXPECT_EQ(f.rows, 128);
  EXPECT_EQ(f.cols, 4);
  EXPECT_EQ(f.payload_bytes, 2048u);
  // Padded groups: 136 columns -> 2 groups of 128; Q3G rows carry a guard byte.
  TrunkGeometry g = ComputeTrunkGeometry(TensorFmt::kQ3G, {3, 136}, 128);
  EXPECT_EQ(g.groups, 2);
  EXPECT_EQ(g.row_bytes, 256u * 3 / 8 + 1);
  EXPECT_EQ(g.scale_bytes, 2u * 3 * 2);
}

TEST(TrunkCode, DecodesEachFormat) {
  const uint8_t q8[2] = {0x59, 0xE3};
  EXPECT_EQ(TrunkCode(TensorFmt::kQ8G, q8, 0), 89);
  EXPECT_EQ(TrunkCode(TensorFmt::kQ8G, q8, 1), -29);
  const uint8_t q4[1] = {0x6A};
  EXPECT_EQ(TrunkCode(TensorFmt::kQ4G, q4, 0), 2);
  EXPECT_EQ(TrunkCode(TensorFmt::kQ4G, q4, 1), -2);
  // Q3G: codes u = 0..7 at bits 3i; element 2 spans bytes 0 and 1.
  uint8_t q3[4] = {};
  const unsigned u[8] = {7, 0, 5, 3, 1, 6, 2, 4};
  for (int i = 0; i < 8; ++i) {
    int t = 3 * i;
    q3[t >> 3] |= static_cast<uint8_t>((u[i] << (t & 7)) & 0xFF);
    if ((t & 7) > 5) q3[(t >> 3) + 1] |= static_cast<uint8_t>(u[i] >> (8 - (t & 7)));
  }
  for (int i = 0; i < 8; ++i) EXPECT_EQ(TrunkCode(TensorFmt::kQ3G, q3, i), static_cast<int>(u[i]) - 4) << i;
}

ExpertQuant Vq3r() { return ExpertQuant{3, 8, 256, 8, "VQ3R"}; }

TEST(RecordLayout, TinyMatchesTheWorkedExample) {
  Result<RecordLayout> l = ComputeRecordLayout(64, 128, Vq3r());
  ASSERT_TRUE(l.has_value());
  EXPECT_EQ(l->m[kGate].offset, 48u);
  EXPECT_EQ(l->m[kUp].offset, 3120u);
  EXPECT_EQ(l->m[kDown].offset, 6192u);
  EXPECT_EQ(l->scales_off, 9264u);
  EXPECT_EQ(l->payload_end, 9776u);
  EXPECT_EQ(l->record_bytes, 12288u);
  EXPECT_EQ(l->m[kDown].nb, 2);
  EXPECT_EQ(l->m[kDown].nv, 8);
  EXPECT_EQ(IndexRunOffset(*l, kDown, 100, 3), 8412u);
}

TEST(RecordLayout, ReferenceSizes) {
  Result<RecordLayout> kimi = ComputeRecordLayout(1024, 2304, Vq3r());
  ASSERT_TRUE(kimi.has_value());
  EXPECT_EQ(kimi->m[kGate].bytes, 884736u);
  EXPECT_EQ(kimi->record_bytes, 2666496u);
  Result<RecordLayout> k3 = ComputeRecordLayout(3072, 3584, Vq3r());
  ASSERT_TRUE(k3.has_value());
  EXPECT_EQ(k3->m[kGate].bytes, 4128768u);
  EXPECT_EQ(k3->record_bytes, 12406784u);
  Result<RecordLayout> k3p = ComputeRecordLayout(3072, 3584, ExpertQuant{4, 8, 64, 6, "VQ4P"});
  ASSERT_TRUE(k3p.has_value());
  EXPECT_EQ(k3p->record_bytes, 12406784u);  // VQ4P: same 3 bytes per run
}

TEST(RecordLayout, RefusesWidthsNotMultipleOfVecDim) {
  Result<RecordLayout> l = ComputeRecordLayout(60, 130, Vq3r());
  ASSERT_FALSE(l.has_value());
  EXPECT_NE(l.error().message().find("vec_dim"), std::string::npos);
}

class RecordHeaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WASTE_SKIP_WITHOUT_FIXTURES();
    bank_ = waste::testing::ReadFile(waste::testing::FixtureDir("warp-tiny") + "/experts-L1.bin");
    ASSERT_EQ(bank_.size(), 98304u);
    layout_ = *ComputeRecordLayout(64, 128, Vq3r());
    want_.layer = 1;
    want_.expert = 0;
    want_.record_bytes = 12288;
    want_.codebook_base = 0;
    want_.n_books = 27;
    want_.layout = &layout_;
  }
  const uint8_t* rec() const { return reinterpret_cast<const uint8_t*>(bank_.data()); }
  Status Mutated(size_t offset, uint8_t value) {
    std::string copy = bank_;
    copy[offset] = static_cast<char>(value);
    return ValidateRecordHeader(reinterpret_cast<const uint8_t*>(copy.data()), want_);
  }
  std::string bank_;
  RecordLayout layout_;
  RecordExpectation want_;
};

TEST_F(RecordHeaderTest, FixtureHeaderFields) {
  RecordHeader h = LoadRecordHeader(rec());
  EXPECT_EQ(h.magic, kRecordMagic);
  EXPECT_EQ(h.layer, 1);
  EXPECT_EQ(h.expert_id, 0);
  EXPECT_EQ(h.fmt, 4);
  EXPECT_EQ(h.rec_4k_blocks, 3u);
  EXPECT_EQ(h.gate_off, 48u);
  EXPECT_EQ(h.up_off, 3120u);
  EXPECT_EQ(h.down_off, 6192u);
  EXPECT_EQ(h.chan_corr_off, 9264u);
  EXPECT_EQ(h.crc32, 0x59C0D8C8u);
  EXPECT_TRUE(ValidateRecordHeader(rec(), want_).ok());
  EXPECT_TRUE(VerifyRecordCrc(rec(), layout_).ok());
}

TEST_F(RecordHeaderTest, EveryFieldIsChecked) {
  struct Case {
    size_t offset;
    uint8_t value;
    const char* names;
  } cases[] = {
      {0, 0x00, "magic"},        {4, 2, "layer"},          {6, 1, "expert_id"},
      {8, 6, "fmt"},             {12, 1, "lowrank_id"},    {10, 1, "codebook_id"},
      {10, 30, "codebook_id"},   {16, 4, "rec_4k_blocks"}, {20, 49, "gate_off"},
      {24, 0x31, "up_off"},      {28, 0x31, "down_off"},   {32, 0x31, "chan_corr_off"},
  };
  for (const Case& c : cases) {
    Status st = Mutated(c.offset, c.value);
    ASSERT_FALSE(st.ok()) << c.names;
    EXPECT_EQ(st.code(), Errc::kIo);
    EXPECT_NE(st.message().find("record header is not what the bank index describes"),
              std::string::npos);
    EXPECT_NE(st.message().find(c.names), std::string::npos) << st.message();
  }
  // Accepted alternatives: fmt 5 (VQ2R byte) with 8-bit indices; flags and
  // reserved bytes are ignored.
  EXPECT_TRUE(Mutated(8, 5).ok());
  EXPECT_TRUE(Mutated(9, 7).ok());
  EXPECT_TRUE(Mutated(14, 1).ok());
  EXPECT_TRUE(Mutated(40, 1).ok());
}

TEST_F(RecordHeaderTest, CrcCoversPayloadNotPadding) {
  std::string copy = bank_;
  copy[5000] ^= 1;
  EXPECT_NE(VerifyRecordCrc(reinterpret_cast<const uint8_t*>(copy.data()), layout_).message().find(
                "checksum mismatch"),
            std::string::npos);
  copy = bank_;
  copy[10000] ^= 1;  // zero padding past payload_end: not covered
  EXPECT_TRUE(VerifyRecordCrc(reinterpret_cast<const uint8_t*>(copy.data()), layout_).ok());
}

TEST_F(RecordHeaderTest, IndicesPastSmallCodebooksAreRefused) {
  RecordLayout small = *ComputeRecordLayout(64, 128, ExpertQuant{3, 8, 16, 8, "VQ3R"});
  RecordExpectation want = want_;
  want.layout = &small;
  std::string copy(12288, '\0');
  std::memcpy(copy.data(), bank_.data(), 48);
  EXPECT_TRUE(ValidateRecordHeader(reinterpret_cast<const uint8_t*>(copy.data()), want).ok());
  copy[100] = 16;
  Status st = ValidateRecordHeader(reinterpret_cast<const uint8_t*>(copy.data()), want);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("byte 100"), std::string::npos) << st.message();
}

}  // namespace
}  // namespace waste::format
