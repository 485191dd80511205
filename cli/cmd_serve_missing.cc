// `waste serve` in a build without cpp-httplib (see server/CMakeLists.txt).
#include <cstdio>

#include "commands.h"

namespace waste::cli {

int ServeMain(const std::vector<std::string>&) {
  std::fprintf(stderr, "waste serve: this build has no HTTP server "
                       "(cpp-httplib was not found; apt-get install libcpp-httplib-dev)\n");
  return 1;
}

}  // namespace waste::cli
