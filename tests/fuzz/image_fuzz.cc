// libFuzzer over the image decoder entry (src/vision/image_decode.cc and
// the system's stb_image behind it): any bytes give an image of the size
// the header probe stated, or a kIo error — never a crash, a leak or an
// allocation past the pixel limit.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <span>

#include "vision/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const uint8_t> bytes(data, size);
  waste::Result<waste::vision::ImageSize> probe = waste::vision::ProbeImage(bytes, "fuzz");
  waste::Result<waste::vision::RgbImage> img = waste::vision::DecodeImage(bytes, "fuzz");
  if (img.has_value()) {
    if (!probe.has_value() || probe->width != img->width || probe->height != img->height) std::abort();
    volatile uint8_t sink = 0;
    const size_t n = img->bytes();
    for (size_t i = 0; i < n; i += 4099) sink ^= img->pixels()[i];
    (void)sink;
  } else if (img.error().code() != waste::Errc::kIo) {
    std::abort();
  }
  return 0;
}
