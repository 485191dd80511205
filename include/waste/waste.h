// Umbrella include for C++ hosts: models and sessions, the one-session
// Engine, configuration, memory plan, status codes, text helpers and build
// facts. (The C API is the separate <waste.h>.)
#pragma once

#include "waste/config.h"
#include "waste/engine.h"
#include "waste/export.h"
#include "waste/grammar.h"
#include "waste/memplan.h"
#include "waste/model.h"
#include "waste/status.h"
#include "waste/text.h"
#include "waste/tokenizer.h"
#include "waste/version.h"


#include <cstdint>
#include <string>

namespace waste {

// The linked library's version ("0.1.0") and MAJOR*10000 + MINOR*100 +
// PATCH; WASTE_VERSION_STRING / WASTE_VERSION_NUMBER are the headers'.
WASTE_EXPORT const char* Version() noexcept;
WASTE_EXPORT int VersionNumber() noexcept;
// "WASTE 0.1.0 (container v0, backend AVX-512, crc32 zlib, x86_64)"
WASTE_EXPORT std::string BuildInfo() noexcept;
// Backend name of the process-wide kernel table ("CPU", "AVX-512", ...).
WASTE_EXPORT std::string BackendName() noexcept;
WASTE_EXPORT uint64_t PhysicalRam() noexcept;
WASTE_EXPORT uint64_t UsableRam() noexcept;
// Peak resident set size of this process so far (0 if unknown).
WASTE_EXPORT uint64_t PeakRssBytes() noexcept;
// The machine's 1-minute load average (runnable threads, all processes), so
// a benchmark can say how busy the machine was; -1 where the OS keeps none
// (Windows).
WASTE_EXPORT double LoadAverage() noexcept;

}  // namespace waste
