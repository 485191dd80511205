// A fresh directory under the system temp dir, removed with everything in
// it at destruction: the tests' scratch space (unit and e2e).
#pragma once

#include <filesystem>
#include <random>
#include <string>
#include <system_error>

namespace waste::testing {

class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = (std::filesystem::temp_directory_path() /
             ("waste-test-" + std::to_string(rd()) + "-" + std::to_string(rd())))
                .string();
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace waste::testing
