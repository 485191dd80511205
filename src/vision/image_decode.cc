#include "vision/image_decode.h"

#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "platform/platform.h"
#include "vision/decoder_guards.h"
#include "vision/stb_bridge.h"

namespace waste::vision {
namespace {

std::string Reason() {
  const char* r = stb::FailureReason();
  return r != nullptr && *r != '\0' ? std::string(r) : std::string("not a supported image");
}

Status SizeError(std::string_view name) {
  return IoError(fmt::format("image dimensions are invalid or exceed the {}-pixel limit: {}",
                             kMaxImagePixels, name));
}

Status TooLarge(std::span<const uint8_t> bytes, std::string_view name) {
  if (bytes.size() > kMaxImageFileBytes) {
    return IoError(fmt::format("cannot decode {}: the file is larger than {} bytes", name,
                               kMaxImageFileBytes));
  }
  return Status::Ok();
}

std::span<const uint8_t> AsBytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

}  // namespace

Result<std::string> ReadImageFile(const std::string& path) {
  Result<platform::File> f = platform::File::Open(path);
  if (!f) return IoError(fmt::format("cannot read {}: {}", path, f.error().message()));
  if (f->size() > kMaxImageFileBytes) {
    return IoError(fmt::format("cannot decode {}: the file is larger than {} bytes", path,
                               kMaxImageFileBytes));
  }
  std::string bytes(static_cast<size_t>(f->size()), '\0');
  if (!bytes.empty()) {
    Status st = f->ReadAt(0, bytes.data(), bytes.size());
    if (!st.ok()) return IoError(fmt::format("cannot read {}: {}", path, st.message()));
  }
  return bytes;
}

Result<ImageSize> ProbeImage(std::span<const uint8_t> bytes, std::string_view name) {
  WASTE_TRY(TooLarge(bytes, name));
  if (bytes.empty()) return IoError(fmt::format("cannot decode {}: the file is empty", name));
  // Before stb parses anything (its header probe reads the tables too).
  if (std::string why = GuardDecoderInput(bytes); !why.empty()) {
    return IoError(fmt::format("cannot decode {}: {}", name, why));
  }
  int w = 0, h = 0, comp = 0;
  if (stb::Info(bytes.data(), static_cast<int>(bytes.size()), &w, &h, &comp) == 0) {
    return IoError(fmt::format("cannot decode {}: {}", name, Reason()));
  }
  if (w <= 0 || h <= 0 ||
      static_cast<uint64_t>(w) * static_cast<uint64_t>(h) > kMaxImagePixels) {
    return SizeError(name);
  }
  return ImageSize{w, h};
}

Result<RgbImage> DecodeImage(std::span<const uint8_t> bytes, std::string_view name) {
  // The header first: a hostile size is refused before any pixel memory.
  WASTE_ASSIGN_OR_RETURN(ImageSize size, ProbeImage(bytes, name));
  int w = 0, h = 0;
  std::shared_ptr<uint8_t> px(stb::LoadRgb(bytes.data(), static_cast<int>(bytes.size()), &w, &h),
                              stb::Free);
  if (!px) return IoError(fmt::format("cannot decode {}: {}", name, Reason()));
  // The decoder's own header parse must agree with the probe's; a file
  // that says two different things is refused rather than trusted.
  if (w != size.width || h != size.height) {
    return IoError(fmt::format("cannot decode {}: header says {}x{}, decoder produced {}x{}",
                               name, size.width, size.height, w, h));
  }
  RgbImage img;
  img.width = w;
  img.height = h;
  img.rgb = std::move(px);
  return img;
}

Result<ImageSize> ProbeImageFile(const std::string& path) {
  WASTE_ASSIGN_OR_RETURN(std::string bytes, ReadImageFile(path));
  return ProbeImage(AsBytes(bytes), path);
}

Result<RgbImage> DecodeImageFile(const std::string& path) {
  WASTE_ASSIGN_OR_RETURN(std::string bytes, ReadImageFile(path));
  return DecodeImage(AsBytes(bytes), path);
}

}  // namespace waste::vision
