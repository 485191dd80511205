// `waste serve`: the OpenAI-compatible HTTP server over one engine.
//
// Routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models,
// GET /v1/models/{id}, GET /health, GET /metrics (Prometheus text),
// POST /tokenize, POST /detokenize, GET / (the chat page). Requests are
// authenticated and validated (and tokenized) on their HTTP thread; only
// valid work waits for the engine, first in, first out.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "waste/waste.h"

namespace waste::server {

struct ServeOptions {
  std::string host = "127.0.0.1";
  int port = 8000;                        // 0 = any free port
  std::string model_id;
  std::string api_key;                    // empty = no authentication
  uint64_t default_max_tokens = 4096;
  bool no_thinking = false;
  int reasoning_budget = -1;              // think-channel tokens when a request names no cap
                                          // (-1 = none; thinking_budget.h)
  int parallel = 1;                       // requests served at once, each on a session slot
                                          // kept for prefix reuse (docs/SERVER.md); the
                                          // engine needs Config::max_sessions >= parallel
                                          // and Config::rewind_marks (RewindMarksFor)
  bool follow_on = true;                  // after a reply, prefill the conversation's likely
                                          // next turn while idle (docs/SERVER.md)
  int earlier_points = 2;                 // restore points kept per slot before its latest
                                          // (an edited earlier turn resumes from one)
  std::string prompt_cache_dir;           // slots' restore points kept here across restarts
                                          // (empty = none): loaded by Create, written by
                                          // SavePromptCache
  uint64_t prompt_cache_bytes = 4ull << 30;  // ... and up to this much of stored points of
                                          // conversations no slot holds (0 = none;
                                          // server/point_store.h)
  int queue = 16;                         // requests that may wait for the engine
  size_t body_limit = 64u << 20;          // request body bytes
  std::string cors_origin;                // empty = no CORS headers
  int http_threads = 16;                  // connections served at once
  std::string container_dir;
  bool vision = false;                    // accept image parts (the engine must have a tower)
  bool allow_local_images = false;        // image parts may name server-side files
};

// The Config::rewind_marks an engine needs for these options: each slot's
// restore point, the follow-on prefill's, and the earlier points.
int RewindMarksFor(const ServeOptions& options);

class HttpServer {
 public:
  static Result<std::unique_ptr<HttpServer>> Create(Engine& engine, const ServeOptions& options);
  ~HttpServer();

  // Binds host:port; returns the port (useful with port 0).
  Result<int> Bind();
  // Serves until Stop(); returns when the listener is closed.
  Status Serve();
  // Shutdown: refuses new work (503), answers every queued request 503
  // (a queued stream gets an error event), stops the running generation
  // at its next token or prefill span (its client gets 503 or an error
  // event), then closes the listener. Safe from any thread; idempotent.
  void Stop();

  // The chat format in use, e.g. "xtml (thinking on)" — for the banner.
  std::string FormatDescription() const;

  // With ServeOptions::prompt_cache_dir: what Create restored, for the
  // banner ("" without a cache), and the pairs it skipped and why.
  std::string PromptCacheDescription() const;
  const std::vector<std::string>& prompt_cache_skipped() const;
  // After Serve() returned: waits for the requests still running (Stop()
  // cancelled them), then writes every slot's restore point to the cache
  // directory. Returns what was saved as one line; the skipped pairs are
  // in prompt_cache_skipped(). "" without a cache directory.
  std::string SavePromptCache();

  struct Impl;

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace waste::server
