#include "base/engine_env.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace waste {

bool EnvFlag(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && v[0] != '0';
}

int EnvInt(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return fallback;
  char* end = nullptr;
  long x = std::strtol(v, &end, 10);
  if (end == v) return fallback;
  return static_cast<int>(x);
}

std::string EnvString(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

int ThreadsFromEnv() {
  const char* v = std::getenv("WASTE_THREADS");
  return v != nullptr ? std::atoi(v) : 0;  // atoi: garbage reads as 0 (the reference's rule)
}

EngineOptions ResolveOptions(const Config& config) {
  EngineOptions o;
  o.verify = config.verify_records || EnvFlag("WASTE_VERIFY");
  if (config.direct_io >= 0) {
    o.direct_io = config.direct_io != 0;
  } else {
    const char* d = std::getenv("WASTE_DIRECT");
    o.direct_io = !(d != nullptr && d[0] == '0');
  }
  o.lookahead = config.lookahead >= 0 ? config.lookahead : EnvInt("WASTE_LOOKAHEAD", 6);
  if (o.lookahead < 0) o.lookahead = 0;
  if (o.lookahead > 64) o.lookahead = 64;
  o.io_threads = config.io_threads >= 0 ? config.io_threads : EnvInt("WASTE_IO_THREADS", 2);
  if (o.io_threads < 0) o.io_threads = 0;
  if (o.io_threads > 8) o.io_threads = 8;
  const char* backend = std::getenv("WASTE_BACKEND");
  o.force_baseline = config.force_baseline_kernels ||
                     (backend != nullptr && std::string(backend) == "cpu");
  o.profile = EnvFlag("WASTE_PROFILE");
  const char* huge = std::getenv("WASTE_HUGE_PAGES");
  o.huge_pages = !(huge != nullptr && huge[0] == '0');
  if (!config.cpu_list.empty()) {
    o.cpu_list = config.cpu_list;
  } else if (const char* c = std::getenv("WASTE_CPUS")) {
    o.cpu_list = c;
  }
  o.threads = config.threads > 0 ? config.threads : ThreadsFromEnv();
  if (const char* v = std::getenv("WASTE_SPIN"); v != nullptr && *v != '\0') {
    char* end = nullptr;
    const long us = std::strtol(v, &end, 10);
    if (end != v && us >= 0) o.spin_us = static_cast<int>(std::min<long>(us, 100000));
  }
  o.io_depth = std::clamp(EnvInt("WASTE_IO_DEPTH", 8), 1, 64);
  o.io_backend = EnvString("WASTE_IO");
  const char* fixed = std::getenv("WASTE_IO_FIXED");
  o.io_fixed_buffers = fixed != nullptr && fixed[0] != '\0' && fixed[0] != '0';
  o.cache_policy = EnvString("WASTE_CACHE_POLICY");
  o.cache_trace = EnvString("WASTE_CACHE_TRACE");
  o.warm_wait = EnvFlag("WASTE_WARM_WAIT");
  return o;
}

}  // namespace waste
