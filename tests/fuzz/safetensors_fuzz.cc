// libFuzzer target: a safetensors file (8-byte header length, JSON header,
// data). The input is the whole file; ParseSafetensorsHeader sees what
// SafetensorsFile::Open would read from it. Invariant: every tensor it
// accepts lies inside the data buffer, holds exactly shape × dtype-size
// bytes, and no two tensors overlap. The same bytes are also read as a
// model.safetensors.index.json: every shard it names stays in the directory.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "convert/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto index = waste::convert::ParseSafetensorsIndex(
      std::string_view(reinterpret_cast<const char*>(data), size), "index.json");
  if (index) {
    for (const auto& [name, shard] : *index) {
      if (shard.empty() || shard.find('/') != std::string::npos || shard.find("..") != std::string::npos) {
        __builtin_trap();
      }
    }
  }
  auto length = waste::convert::SafetensorsHeaderLength(data, size, size, "fuzz.safetensors");
  if (!length) return 0;
  const uint64_t n = *length;
  if (n + 8 > size) __builtin_trap();  // the length check let a header past the file through
  std::string_view header(reinterpret_cast<const char*>(data) + 8, n);
  auto tensors = waste::convert::ParseSafetensorsHeader(header, size, "fuzz.safetensors");
  if (!tensors) return 0;
  std::vector<std::pair<uint64_t, uint64_t>> spans;
  for (const auto& [name, t] : *tensors) {
    if (t.begin < 8 + n || t.begin + t.bytes > size || t.begin + t.bytes < t.begin) __builtin_trap();
    if (t.bytes != static_cast<uint64_t>(t.elements()) * waste::convert::DTypeBytes(t.dtype)) {
      __builtin_trap();
    }
    if (t.bytes > 0) spans.emplace_back(t.begin, t.begin + t.bytes);
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i) {
    if (spans[i].first < spans[i - 1].second) __builtin_trap();
  }
  return 0;
}
