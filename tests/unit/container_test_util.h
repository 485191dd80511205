// Helpers for the container tests: fixture paths, writable temporary copies
// of a fixture container, and small byte/JSON mutations of those copies.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "platform/platform.h"
#include "temp_dir.h"

namespace waste::testing {

inline std::string FixtureDir(const std::string& set) {
  return std::string(WASTE_FIXTURES_DIR) + "/" + set + "/container";
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void WriteFile(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A record-sized buffer aligned for cache-bypass reads (banks are opened
// with O_DIRECT where the filesystem allows).
class RecordBuffer {
 public:
  explicit RecordBuffer(size_t n)
      : n_(n), p_(static_cast<uint8_t*>(platform::AlignedAlloc(platform::kBypassAlignment, n))) {}
  uint8_t* data() { return p_.get(); }
  size_t size() const { return n_; }
  uint8_t operator[](size_t i) const { return p_.get()[i]; }

 private:
  size_t n_;
  platform::AlignedPtr<uint8_t> p_;
};

// A writable copy of a fixture container (the fixtures are read-only).
class FixtureCopy : public TempDir {
 public:
  explicit FixtureCopy(const std::string& set = "warp-tiny") {
    for (const auto& entry : std::filesystem::directory_iterator(FixtureDir(set))) {
      WriteFile(*this / entry.path().filename().string(), ReadFile(entry.path().string()));
    }
  }
  nlohmann::ordered_json Manifest() const {
    return nlohmann::ordered_json::parse(ReadFile(*this / "manifest.json"));
  }
  void SetManifest(const nlohmann::ordered_json& m) const {
    WriteFile(*this / "manifest.json", m.dump(1));
  }
  void FlipByte(const std::string& file, size_t offset, uint8_t mask = 0xFF) const {
    std::string bytes = ReadFile(*this / file);
    bytes.at(offset) = static_cast<char>(static_cast<uint8_t>(bytes[offset]) ^ mask);
    WriteFile(*this / file, bytes);
  }
  void Truncate(const std::string& file, size_t remove) const {
    std::string bytes = ReadFile(*this / file);
    bytes.resize(bytes.size() - remove);
    WriteFile(*this / file, bytes);
  }
};

}  // namespace waste::testing
