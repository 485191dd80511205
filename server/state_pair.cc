#include "state_pair.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <system_error>

#include "json_text.h"
#include "waste/files.h"

namespace waste::server {

std::string FileHash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  uint64_t h = 0xcbf29ce484222325ull;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    for (std::streamsize i = 0; i < in.gcount(); ++i) {
      h = (h ^ static_cast<uint8_t>(buf[static_cast<size_t>(i)])) * 0x100000001b3ull;
    }
  }
  if (in.bad()) return {};
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

Result<TokenFile> ReadTokenFile(const std::string& path, int vocab, uint32_t ctx) {
  // At most ctx ids of up to 7 digits and a separator, plus the wrapper.
  const uint64_t limit = uint64_t{ctx} * 8 + 4096;
  Result<std::string> text = ReadRegularFile(path, limit, "token file");
  if (!text) return text.error();
  Json j;
  std::string err;
  if (!ParseJson(*text, &j, &err)) return FormatError(path + ": not JSON (" + err + ")");
  auto it = j.is_object() ? j.find("tokens") : j.end();
  if (it == j.end() || !it->is_array()) return FormatError(path + ": no \"tokens\" array");
  TokenFile file;
  file.ids.reserve(it->size());
  for (const Json& v : *it) {
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= vocab) {
      return FormatError(path + ": token " + std::to_string(file.ids.size()) +
                         " is not an id below the vocabulary size " + std::to_string(vocab));
    }
    file.ids.push_back(v.get<int>());
  }
  auto hash = j.find("state_fnv1a");
  if (hash == j.end() || !hash->is_string()) {
    return FormatError(path + ": no \"state_fnv1a\" naming its state file");
  }
  file.state_hash = hash->get<std::string>();
  // FileHash's spelling, so no file (whose hash is "") can match it.
  if (file.state_hash.size() != 16 ||
      file.state_hash.find_first_not_of("0123456789abcdef") != std::string::npos) {
    return FormatError(path + ": \"state_fnv1a\" is not 16 hex digits");
  }
  return file;
}

Status WriteTokenFile(const std::string& path, const std::vector<int>& ids,
                      const std::string& state_hash) {
  const Json file = {{"tokens", ids}, {"state_fnv1a", state_hash}};
  return ReplaceRegularFile(path, Dump(file, JsonStyle::kCompact), "token file");
}

void RemoveIfThere(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

}  // namespace waste::server
