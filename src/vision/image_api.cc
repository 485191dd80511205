// waste/image.h: the model-free image calls of the public API.
#include "waste/image.h"

#include <exception>

#include "vision/image_decode.h"
#include "base/exception_status.h"

namespace waste {

Result<ImageDimensions> ProbeImageFile(const std::string& path) noexcept {
  try {
    WASTE_ASSIGN_OR_RETURN(vision::ImageSize s, vision::ProbeImageFile(path));
    return ImageDimensions{s.width, s.height};
  } catch (const std::exception& e) {
    return StatusFromException(e, Errc::kIo, e.what());
  }
}

Result<ImageDimensions> ProbeImageBytes(std::span<const uint8_t> bytes,
                                        std::string_view name) noexcept {
  try {
    WASTE_ASSIGN_OR_RETURN(vision::ImageSize s, vision::ProbeImage(bytes, name));
    return ImageDimensions{s.width, s.height};
  } catch (const std::exception& e) {
    return StatusFromException(e, Errc::kIo, e.what());
  }
}

}  // namespace waste
