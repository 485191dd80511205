// Environment variables read once at open into a per-engine options struct
// (ENGINE.md §2). An explicit Config value always beats the environment.
#pragma once

#include <string>

#include "waste/config.h"

namespace waste {

struct EngineOptions {
  bool verify = false;
  bool direct_io = true;
  int lookahead = 6;
  int io_threads = 2;
  bool force_baseline = false;
  bool profile = false;
  std::string cpu_list;
  int threads = 0;
};

// "On" = set (even empty) and first character not '0'.
bool EnvFlag(const char* name);
// Integer value, `fallback` when unset or not a number.
int EnvInt(const char* name, int fallback);
EngineOptions ResolveOptions(const Config& config);

}  // namespace waste
