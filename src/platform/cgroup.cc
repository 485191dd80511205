// Reads cgroup memory limits from plain files, so it is portable and the
// tests can aim it at fake trees (ENGINE.md §4.3). Only capacity counts:
// memory.max / memory.high (v2) and memory.limit_in_bytes (v1), never
// current usage.
#include "platform/cgroup.h"

#include <string_view>
#include <vector>

#include "platform/platform.h"

namespace waste::platform {
namespace {

// v1 reports "unlimited" as LONG_MAX rounded down to a page; anything this
// large is no limit on any machine that exists.
constexpr uint64_t kUnlimitedFloor = uint64_t{1} << 62;

// A limit file's value: decimal bytes and optional trailing whitespace
// (the kernel writes a newline). "max", junk, overflow and 0 give 0.
uint64_t ParseLimit(std::string_view text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' ' ||
                           text.back() == '\t')) {
    text.remove_suffix(1);
  }
  if (text.empty()) return 0;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return 0;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (UINT64_MAX - digit) / 10) return 0;
    value = value * 10 + digit;
  }
  return value >= kUnlimitedFloor ? 0 : value;
}

// Splits a cgroup path into components; false when it tries to climb out
// with "..", which would let a crafted path read files outside the mount.
bool SplitPath(std::string_view path, std::vector<std::string>* parts) {
  parts->clear();
  size_t i = 0;
  while (i < path.size()) {
    size_t j = path.find('/', i);
    if (j == std::string_view::npos) j = path.size();
    std::string_view part = path.substr(i, j - i);
    if (part == "..") return false;
    if (!part.empty() && part != ".") parts->emplace_back(part);
    i = j + 1;
  }
  return true;
}

std::string Join(const std::string& root, const std::vector<std::string>& parts, size_t n) {
  std::string dir = root;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  for (size_t i = 0; i < n; ++i) dir += "/" + parts[i];
  return dir;
}

void Consider(const std::string& file, const char* kind, CgroupLimit* best) {
  Result<std::string> text = ReadWholeFile(file);
  if (!text) return;
  uint64_t value = ParseLimit(*text);
  if (value == 0) return;
  if (best->bytes == 0 || value < best->bytes) {
    best->bytes = value;
    best->source = file;
    best->kind = kind;
  }
}

// Walks `root`/<path> up to and including `root`, reading `file` in each.
void WalkUp(const std::string& root, const std::vector<std::string>& parts, const char* file,
            const char* kind, CgroupLimit* best) {
  for (size_t n = parts.size() + 1; n-- > 0;) {
    Consider(Join(root, parts, n) + "/" + file, kind, best);
  }
}

struct SelfCgroup {
  bool readable = false;
  bool has_v2 = false;
  std::string v2_path;
  bool has_v1_memory = false;
  std::string v1_path;
};

SelfCgroup ReadSelf(const std::string& proc_self_cgroup) {
  SelfCgroup self;
  Result<std::string> text = ReadWholeFile(proc_self_cgroup);
  if (!text) return self;
  self.readable = true;
  std::string_view rest = *text;
  while (!rest.empty()) {
    size_t eol = rest.find('\n');
    std::string_view line = rest.substr(0, eol);
    rest = eol == std::string_view::npos ? std::string_view() : rest.substr(eol + 1);
    // "hierarchy-id:controller,list:path"; the path may itself contain ':'.
    size_t c1 = line.find(':');
    if (c1 == std::string_view::npos) continue;
    size_t c2 = line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::string_view id = line.substr(0, c1);
    std::string_view controllers = line.substr(c1 + 1, c2 - c1 - 1);
    std::string_view path = line.substr(c2 + 1);
    if (id == "0" && controllers.empty()) {
      self.has_v2 = true;
      self.v2_path = std::string(path);
      continue;
    }
    size_t i = 0;
    while (i <= controllers.size()) {
      size_t j = controllers.find(',', i);
      if (j == std::string_view::npos) j = controllers.size();
      if (controllers.substr(i, j - i) == "memory") {
        self.has_v1_memory = true;
        self.v1_path = std::string(path);
      }
      i = j + 1;
    }
  }
  return self;
}

}  // namespace

CgroupLimit ReadCgroupMemoryLimit(const std::string& cgroup_root,
                                  const std::string& proc_self_cgroup) {
  CgroupLimit best;
  SelfCgroup self = ReadSelf(proc_self_cgroup);
  std::vector<std::string> parts;

  // v2. Without a readable "0::" line, or with a path that climbs, the root
  // alone is read: inside a container with a cgroup namespace the root is
  // the container's own group and carries its limit.
  if (!self.has_v2 || !SplitPath(self.v2_path, &parts)) parts.clear();
  WalkUp(cgroup_root, parts, "memory.max", "cgroup v2 memory.max", &best);
  WalkUp(cgroup_root, parts, "memory.high", "cgroup v2 memory.high", &best);

  // v1: the memory controller's own mount, same walk.
  std::string v1_root = Join(cgroup_root, {}, 0) + "/memory";
  if (!self.has_v1_memory || !SplitPath(self.v1_path, &parts)) parts.clear();
  WalkUp(v1_root, parts, "memory.limit_in_bytes", "cgroup v1 memory.limit_in_bytes", &best);
  return best;
}

}  // namespace waste::platform
