// Umbrella include for hosts: the engine API, configuration, memory plan,
// status codes and build facts.
#pragma once

#include "waste/config.h"
#include "waste/engine.h"
#include "waste/grammar.h"
#include "waste/memplan.h"
#include "waste/status.h"
#include "waste/text.h"

#define WASTE_VERSION_MAJOR 0
#define WASTE_VERSION_MINOR 1
#define WASTE_VERSION_PATCH 0
#define WASTE_VERSION_STRING "0.1.0"
#define WASTE_API_VERSION 1
#define WASTE_FORMAT_VERSION 0

#include <cstdint>
#include <string>

namespace waste {

// "WASTE 0.1.0 (container v0, backend AVX-512, crc32 zlib, x86_64)"
std::string BuildInfo();
// Backend name of the process-wide kernel table ("CPU", "AVX-512", ...).
std::string BackendName();
uint64_t PhysicalRam();
uint64_t UsableRam();
// Peak resident set size of this process so far (0 if unknown).
uint64_t PeakRssBytes();

}  // namespace waste
