// Shared by the server golden tests: the fixture files and one engine on
// the tiny tokenizer container (tokenization only).
#pragma once

#include <gtest/gtest.h>

#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "json_text.h"
#include "session_pool.h"
#include "shared_fixtures.h"
#include "waste/waste.h"

namespace waste::server::testing {

inline Json LoadServeFixture(const std::string& name) {
  std::ifstream in(std::string(WASTE_FIXTURES_DIR) + "/serve/" + name);
  std::stringstream ss;
  ss << in.rdbuf();
  Json j;
  std::string err;
  if (!ParseJson(ss.str(), &j, &err)) return Json();
  return j;
}

inline bool ServeFixturesPresent() {
  return std::ifstream(std::string(WASTE_FIXTURES_DIR) + "/serve/render.json").good() &&
         ::waste::testing::SharedFixturesPresent();
}

inline std::string TinyTokContainer() {
  return std::string(WASTE_FIXTURES_DIR) + "/warp-tiny-tok/container";
}

inline Engine* TinyEngine() {
  static std::unique_ptr<Engine> engine = [] {
    Config cfg;
    cfg.rewind_marks = SessionPool::kMarks;  // as `waste serve` opens it (prefix reuse, follow-on)
    auto e = Engine::Open(TinyTokContainer(), cfg);
    return e ? std::move(*e) : nullptr;
  }();
  return engine.get();
}

}  // namespace waste::server::testing

#define WASTE_SKIP_WITHOUT_SERVE_FIXTURES()                                              \
  do {                                                                                   \
    if (!::waste::server::testing::ServeFixturesPresent()) {                             \
      GTEST_SKIP() << "the serve fixtures are not under " << WASTE_FIXTURES_DIR;         \
    }                                                                                    \
  } while (0)
