// Image files to RGB8 (the vision tower's input). Decoding is stb_image's
// (Debian's libstb-dev header, compiled in stb_image_impl.cc with HDR, PIC
// and PNM off, so the accepted formats are those of the reference: JPEG,
// PNG, BMP, TGA, PSD, GIF first frame). The format comes from the bytes,
// never from the file name. Every failure is a Status naming the file.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "waste/status.h"

namespace waste::vision {

// Width * height above this is refused from the header, before decoding.
inline constexpr uint64_t kMaxImagePixels = 64ull * 1024 * 1024;
// Files above this are refused before they are read (no image within the
// pixel limit needs more, even as an uncompressed 16-bit RGBA PNG).
inline constexpr uint64_t kMaxImageFileBytes = 640ull * 1024 * 1024;

struct ImageSize {
  int width = 0;
  int height = 0;
};

// Stored pixels, 3 bytes per pixel (R, G, B), rows top to bottom. Alpha is
// dropped (no compositing), grey is replicated, 16-bit samples keep their
// high byte, EXIF orientation and colour profiles are ignored.
struct RgbImage {
  int width = 0;
  int height = 0;
  // The decoder's own buffer (no copy: an image at the pixel limit is
  // 192 MiB), or any buffer a test fills.
  std::shared_ptr<uint8_t> rgb;
  const uint8_t* pixels() const { return rgb.get(); }
  size_t bytes() const { return static_cast<size_t>(width) * static_cast<size_t>(height) * 3; }
};

// Header probe only. `name` is used in messages. kIo for anything that is
// not an accepted image or whose size is out of range.
Result<ImageSize> ProbeImage(std::span<const uint8_t> bytes, std::string_view name);
Result<RgbImage> DecodeImage(std::span<const uint8_t> bytes, std::string_view name);

// A file's bytes, read whole after the size check (kIo naming the file).
Result<std::string> ReadImageFile(const std::string& path);

// The same from a file (read whole, after a size check).
Result<ImageSize> ProbeImageFile(const std::string& path);
Result<RgbImage> DecodeImageFile(const std::string& path);

}  // namespace waste::vision
