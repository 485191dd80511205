// Parser for cpu lists like "0-5,8" (ENGINE.md §6.3). Portable, no OS calls.
#pragma once

#include <string_view>
#include <vector>

#include "waste/status.h"

namespace waste::platform {

// Sorted, de-duplicated CPU ids; kArg naming the problem when malformed.
Result<std::vector<int>> ParseCpuList(std::string_view text);

}  // namespace waste::platform
