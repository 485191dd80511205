// version: exactly one line, BuildInfo() (scripts parse its shape).
#include <cstdio>

#include "commands.h"
#include "waste/waste.h"

namespace waste::cli {

int VersionCommand(const Options&) {
  std::printf("%s\n", BuildInfo().c_str());
  return 0;
}

}  // namespace waste::cli
