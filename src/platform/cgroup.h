// cgroup memory limits (ENGINE.md §4.3), read from a root directory so tests
// can point it at fake trees. Returns 0 when there is no finite limit.
#pragma once

#include <cstdint>
#include <string>

namespace waste::platform {

struct CgroupLimit {
  uint64_t bytes = 0;      // 0 = no finite limit found
  std::string source;      // which file set it
};

// v2: walk from the process's cgroup (the "0::" line of `proc_self_cgroup`)
// up to `cgroup_root`, taking the smallest finite memory.max / memory.high.
// v1: memory.limit_in_bytes under `cgroup_root`/memory/<path>.
CgroupLimit ReadCgroupMemoryLimit(const std::string& cgroup_root,
                                  const std::string& proc_self_cgroup);

}  // namespace waste::platform
