// Facts about this process that the CLI needs and the public API does not
// offer (yet): whether stdin is a terminal, peak resident memory. Kept to
// the C and POSIX calls MinGW also provides, so there is no per-OS #ifdef.
#pragma once

#include <cstdint>

namespace waste::cli {

bool StdinIsTerminal();
// Peak resident set of this process in bytes; 0 where unknown.
uint64_t PeakRssBytes();

}  // namespace waste::cli
