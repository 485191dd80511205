// A fixture base for tests that drive the `waste` binary: a fresh
// directory per test under gtest's TempDir, named by `prefix`, the pid and
// the test (so parallel ctest runs never share one), removed afterwards.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace waste::test {

class PerTestDir : public ::testing::Test {
 protected:
  explicit PerTestDir(std::string prefix) : prefix_(std::move(prefix)) {}
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    dir_ = std::filesystem::path(::testing::TempDir()) /
           (prefix_ + "_" + std::to_string(getpid()) + "_" + info->name());
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  std::filesystem::path dir_;

 private:
  std::string prefix_;
};

}  // namespace waste::test
