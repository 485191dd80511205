// Image decoding (src/vision/image_decode.*): every accepted format to RGB8
// with the reference's colour rules, and a clear kIo naming the file for
// everything else. The images are written by tests/data/images/
// make_images.py with pixel formulas repeated here.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "vision/image_decode.h"
#include "waste/image.h"

namespace waste::vision {
namespace {

const std::string kDir = std::string(WASTE_SOURCE_DIR) + "/tests/data/images/";
constexpr int kW = 23, kH = 17;

struct Px {
  int r, g, b;
};
Px Rgb(int x, int y) { return {(x * 11 + y * 3) & 255, (x * 5 + y * 17) & 255, (x * 29 + y * 7) & 255}; }
int Grey(int x, int y) { return (x * 7 + y * 13) & 255; }
int Grey16(int x, int y) { return (x * 2851 + y * 977) & 0xFFFF; }
Px Palette(int i) { return {(i * 3) & 255, (i * 5) & 255, (i * 7) & 255}; }

Px At(const RgbImage& img, int x, int y) {
  const uint8_t* p = img.pixels() + (static_cast<size_t>(y) * img.width + x) * 3;
  return {p[0], p[1], p[2]};
}

RgbImage Decode(const std::string& name) {
  Result<RgbImage> img = DecodeImageFile(kDir + name);
  EXPECT_TRUE(img.has_value()) << name << ": " << img.error().message();
  if (!img) return {};
  EXPECT_EQ(img->width, kW) << name;
  EXPECT_EQ(img->height, kH) << name;
  return std::move(*img);
}

// Lossless formats give back exactly the stored pixels.
TEST(ImageDecode, LosslessRgbFormatsAreExact) {
  for (const char* name : {"rgb.png", "rgb.bmp", "rgb.tga"}) {
    RgbImage img = Decode(name);
    if (!img.pixels()) continue;
    int bad = 0;
    for (int y = 0; y < kH; ++y) {
      for (int x = 0; x < kW; ++x) {
        Px a = At(img, x, y), b = Rgb(x, y);
        bad += a.r != b.r || a.g != b.g || a.b != b.b;
      }
    }
    EXPECT_EQ(bad, 0) << name;
  }
}

TEST(ImageDecode, GreyIsReplicatedAlphaDroppedSixteenBitsKeepTheHighByte) {
  RgbImage grey = Decode("grey.png");
  RgbImage rgba = Decode("rgba.png");
  RgbImage g16 = Decode("grey16.png");
  ASSERT_TRUE(grey.pixels() && rgba.pixels() && g16.pixels());
  for (int y = 0; y < kH; ++y) {
    for (int x = 0; x < kW; ++x) {
      Px g = At(grey, x, y);
      EXPECT_TRUE(g.r == Grey(x, y) && g.g == Grey(x, y) && g.b == Grey(x, y));
      // Alpha 0 at x = 0 (and wherever x*40 wraps to 0): colour kept as stored.
      Px a = At(rgba, x, y), want = Rgb(x, y);
      EXPECT_TRUE(a.r == want.r && a.g == want.g && a.b == want.b) << x << "," << y;
      Px h = At(g16, x, y);
      EXPECT_EQ(h.r, Grey16(x, y) >> 8) << x << "," << y;
    }
  }
}

TEST(ImageDecode, PaletteAndFirstGifFrame) {
  for (const char* name : {"palette.png", "anim.gif"}) {
    RgbImage img = Decode(name);
    if (!img.pixels()) continue;
    for (int y = 0; y < kH; ++y) {
      for (int x = 0; x < kW; ++x) {
        Px a = At(img, x, y), b = Palette((x + y) % 16);
        ASSERT_TRUE(a.r == b.r && a.g == b.g && a.b == b.b) << name << " " << x << "," << y;
      }
    }
  }
}

// JPEG is lossy: the decoded pixels are close to what was encoded.
TEST(ImageDecode, BaselineAndProgressiveJpeg) {
  for (const char* name : {"baseline.jpg", "progressive.jpg"}) {
    RgbImage img = Decode(name);
    if (!img.pixels()) continue;
    double sum = 0;
    for (int y = 0; y < kH; ++y) {
      for (int x = 0; x < kW; ++x) {
        Px a = At(img, x, y), b = Rgb(x, y);
        sum += std::abs(a.r - b.r) + std::abs(a.g - b.g) + std::abs(a.b - b.b);
      }
    }
    EXPECT_LT(sum / (kW * kH * 3), 24.0) << name;  // mean error of a q92 JPEG of noise-like data
  }
}

TEST(ImageDecode, ProbeReadsTheHeaderOnly) {
  Result<ImageSize> s = ProbeImageFile(kDir + "rgb.png");
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->width, kW);
  EXPECT_EQ(s->height, kH);
  Result<ImageDimensions> pub = waste::ProbeImageFile(kDir + "progressive.jpg");
  ASSERT_TRUE(pub.has_value());
  EXPECT_EQ(pub->width, kW);
}

void ExpectRefused(const std::string& name, const std::string& says) {
  for (bool probe : {false, true}) {
    Status st = probe ? ProbeImageFile(kDir + name).error() : DecodeImageFile(kDir + name).error();
    EXPECT_EQ(st.code(), Errc::kIo) << name;
    EXPECT_NE(st.message().find(name), std::string::npos) << st.message();
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
    if (probe && name.starts_with("truncated")) break;  // the header of a cut file may be fine
  }
}

TEST(ImageDecode, RefusalsNameTheFile) {
  ExpectRefused("huge_header.png", "exceed the 67108864-pixel limit");
  ExpectRefused("huger_header.png", "cannot decode");  // stb's header parse refuses it first
  ExpectRefused("zero_width.png", "cannot decode");
  ExpectRefused("rgb.ppm", "cannot decode");      // PNM is off, as in the reference
  ExpectRefused("rgb.tiff", "cannot decode");
  ExpectRefused("not_an_image.txt", "cannot decode");
  ExpectRefused("empty.png", "empty");
  // Found by tests/fuzz/image_fuzz in Debian's stb_image 2.27: a JPEG
  // Huffman table with more than 256 codes (overflows stb's tables) and a
  // PNG chunk declaring 1.6 GB in an 800-byte file (stb allocates it).
  ExpectRefused("fuzz_dht_overflow.jpg", "Huffman table");
  // The same overflow behind a start marker with a fill byte (FF FF D8).
  ExpectRefused("fuzz_dht_overflow_fill.jpg", "Huffman table");
  ExpectRefused("fuzz_png_huge_chunk.png", "past the end of the file");
  // A progressive scan decoding with a Huffman table no DHT segment defined:
  // stb reads whatever the heap held there (an index of 998 into a
  // 257-entry table when the heap was full of 0xFF).
  ExpectRefused("fuzz_undefined_huffman.jpg", "Huffman table no DHT segment defined");
  ExpectRefused("missing.png", "cannot read");
  Status st = DecodeImageFile(kDir + "truncated.png").error();
  EXPECT_EQ(st.code(), Errc::kIo);
  EXPECT_NE(st.message().find("truncated.png"), std::string::npos);
}

// A truncated JPEG must not crash; stb is lenient with a cut scan, so a
// result is either a clean refusal or an image of the stated size.
TEST(ImageDecode, TruncatedJpegNeverCrashes) {
  Result<RgbImage> img = DecodeImageFile(kDir + "truncated.jpg");
  if (!img) {
    EXPECT_EQ(img.error().code(), Errc::kIo);
  } else {
    EXPECT_EQ(img->width, kW);
  }
}

}  // namespace
}  // namespace waste::vision
