// Public machine facts (include/waste/waste.h) over the platform shim.
#include "platform/platform.h"
#include "waste/waste.h"

namespace waste {

uint64_t PhysicalRam() { return platform::PhysicalRam(); }
uint64_t UsableRam() { return platform::GetUsableRam().bytes; }
uint64_t PeakRssBytes() { return platform::PeakRssBytes(); }

}  // namespace waste
