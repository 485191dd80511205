// Shared by the HTTP server's tests: a server running in-process on a
// loopback port, the tiny engine opened as `--parallel 2` opens it, and
// parsers for bodies and event streams.
#pragma once

#include <httplib.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "golden_util.h"
#include "http_server.h"
#include "json_text.h"

namespace waste::server::testing {

// One running server; stopped and joined on destruction.
class Running {
 public:
  // On `engine` (default: the shared tiny engine, one session).
  explicit Running(ServeOptions o, Engine* engine = nullptr) {
    o.host = "127.0.0.1";
    o.port = 0;
    o.container_dir = TinyTokContainer();
    auto s = HttpServer::Create(engine != nullptr ? *engine : *TinyEngine(), o);
    server_ = std::move(*s);
    auto port = server_->Bind();
    port_ = port ? *port : -1;
    thread_ = std::thread([this] { (void)server_->Serve(); });
  }
  ~Running() { Stop(); }
  // Stops the server (as Ctrl-C does) and waits for Serve() to return.
  void Stop() {
    if (!thread_.joinable()) return;
    server_->Stop();
    thread_.join();
  }
  int port() const { return port_; }
  httplib::Client Client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c;
  }
  // The sample named `name` in /metrics (its sample line, never its HELP
  // line), or -1 when absent.
  long Metric(const char* name) const {
    auto m = Client().Get("/metrics");
    std::string key = std::string("\n") + name + " ";
    size_t at = m ? m->body.find(key) : std::string::npos;
    return at == std::string::npos ? -1L : std::stol(m->body.substr(at + key.size()));
  }
  // Polls Metric(name) every 5 ms until it reaches `value` or `tries` polls
  // have passed; returns the last sample. The default allows 10 s: under the
  // whole suite's load (two tests at once on two cores) a follow-on prefill
  // once took longer than the 2 s it used to allow.
  long AwaitMetric(const char* name, long value, int tries = 2000) const {
    long v = Metric(name);
    for (int i = 1; i < tries && v < value; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      v = Metric(name);
    }
    return v;
  }

 private:
  std::unique_ptr<HttpServer> server_;
  int port_ = -1;
  std::thread thread_;
};

inline Json ParseBody(const std::string& s) {
  Json j;
  std::string err;
  ParseJson(s, &j, &err);
  return j;
}

// POSTs `req` as JSON; the status (0: no answer) and the parsed body.
inline std::pair<int, Json> PostJson(httplib::Client& c, const char* path, const Json& req) {
  auto r = c.Post(path, Dump(req, JsonStyle::kSpaced), "application/json");
  EXPECT_TRUE(r) << path;
  return r ? std::make_pair(r->status, ParseBody(r->body)) : std::make_pair(0, Json());
}

inline std::vector<Json> ParseSse(const std::string& body) {
  std::vector<Json> out;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    std::string data = body.substr(pos + 6, end - pos - 6);
    out.push_back(data == "[DONE]" ? Json("[DONE]") : ParseBody(data));
    pos = end + 2;
  }
  return out;
}

// The tiny engine opened as `waste serve --parallel 2` opens it (two
// sessions, rewind marks), for the tests of concurrent requests.
inline std::unique_ptr<Engine> TwoSlotEngine() {
  Config cfg;
  cfg.rewind_marks = RewindMarksFor(ServeOptions{});  // with the earlier points
  cfg.max_sessions = 2;
  auto engine = Engine::Open(TinyTokContainer(), cfg);
  EXPECT_TRUE(engine) << engine.error().ToString();
  return engine ? std::move(*engine) : nullptr;
}

}  // namespace waste::server::testing
