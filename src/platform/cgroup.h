// cgroup memory limits (ENGINE.md §4.3), read from a root directory so tests
// can point it at fake trees. Returns 0 when there is no finite limit.
#pragma once

#include <cstdint>
#include <string>

namespace waste::platform {

struct CgroupLimit {
  uint64_t bytes = 0;      // 0 = no finite limit found
  std::string source;      // which file set it
  std::string kind;        // "cgroup v2 memory.max", "cgroup v2 memory.high", "cgroup v1"
};

// v2: walk from the process's cgroup (the "0::" line of `proc_self_cgroup`)
// up to `cgroup_root`, taking the smallest finite memory.max / memory.high.
// v1: memory.limit_in_bytes under `cgroup_root`/memory/<path> and its
// ancestors. A path containing ".." is ignored (only the root is read); an
// unreadable `proc_self_cgroup` also means "the root only". Values that are
// "max", unreadable, malformed, zero or followed by junk are no limit.
CgroupLimit ReadCgroupMemoryLimit(const std::string& cgroup_root,
                                  const std::string& proc_self_cgroup);

}  // namespace waste::platform
