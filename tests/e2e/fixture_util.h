// Helpers shared by the end-to-end tests: fixture paths and files.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace waste::testing {

inline std::string FixtureDir(const std::string& set) {
  return std::string(WASTE_FIXTURES_DIR) + "/" + set;
}

inline bool FixturesPresent(const std::string& set) {
  std::ifstream f(FixtureDir(set) + "/container/manifest.json");
  return f.good();
}

inline std::vector<float> ReadF32(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> v(bytes.size() / 4);
  std::copy(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(v.size() * 4),
            reinterpret_cast<char*>(v.data()));
  return v;
}

inline nlohmann::json ReadJson(const std::string& path) {
  std::ifstream f(path);
  return nlohmann::json::parse(f, nullptr, false);
}

inline std::vector<int> Ids(const nlohmann::json& j) { return j.get<std::vector<int>>(); }

inline float MaxAbs(std::span<const float> a) {
  float m = 0;
  for (float x : a) m = std::max(m, std::fabs(x));
  return m;
}

inline float MaxAbsDiff(std::span<const float> a, std::span<const float> b) {
  float m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(a[i] - b[i]));
  return m;
}

}  // namespace waste::testing
