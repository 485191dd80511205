// Public version and machine facts (include/waste/waste.h) over the
// platform shim.
#include "platform/platform.h"
#include "waste/waste.h"

namespace waste {

const char* Version() noexcept { return WASTE_VERSION_STRING; }
int VersionNumber() noexcept { return WASTE_VERSION_NUMBER; }

uint64_t PhysicalRam() noexcept {
  try {
    return platform::PhysicalRam();
  } catch (...) {
    return 0;
  }
}
uint64_t UsableRam() noexcept {
  try {
    return platform::GetUsableRam().bytes;
  } catch (...) {
    return 0;
  }
}
uint64_t PeakRssBytes() noexcept {
  try {
    return platform::PeakRssBytes();
  } catch (...) {
    return 0;
  }
}
double LoadAverage() noexcept {
  try {
    return platform::LoadAverage();
  } catch (...) {
    return -1.0;
  }
}

}  // namespace waste
