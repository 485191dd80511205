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

Result<std::vector<uint8_t>> ReadImageFile(const std::string& path) noexcept {
  try {
    WASTE_ASSIGN_OR_RETURN(std::string bytes, vision::ReadImageFile(path));
    return std::vector<uint8_t>(bytes.begin(), bytes.end());
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
