// `waste serve MODEL`: the OpenAI-compatible HTTP server (server/). Parses
// its own options (they are not the run/chat ones), opens the engine, prints
// the banner and serves until Ctrl-C.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "commands.h"
#include "engine_setup.h"
#include "http_server.h"
#include "options.h"
#include "waste/types.h"
#include "waste/waste.h"

namespace waste::cli {
namespace {

std::atomic<bool> g_stop{false};
// The first Ctrl-C / SIGTERM asks for a prompt shutdown (the watcher thread
// stops the server); a second one exits at once.
extern "C" void OnSignal(int) {
  if (g_stop.exchange(true)) std::_Exit(130);
}

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string DefaultModelId(const std::string& dir) {
  std::string name = std::filesystem::path(dir).lexically_normal().filename().string();
  if (name.empty()) name = std::filesystem::path(dir).lexically_normal().parent_path().filename().string();
  if (name.size() > 6 && name.substr(name.size() - 6) == ".waste") name.resize(name.size() - 6);
  return name.empty() ? "waste" : name;
}

}  // namespace

int ServeMain(const std::vector<std::string>& args) {
  CLI::App app{"waste serve: an OpenAI-compatible (and Anthropic-compatible) HTTP server over one model", "waste serve"};
  std::string model, budget = "0", cache, cpus, usage, prompt_cache_size = "4G";
  server::ServeOptions so;
  Config cfg;
  uint32_t ctx = 0;
  int threads = 0;
  bool no_direct_io = false, verify = false, exclusive = false, plan = false, vision = false;
  int draft = 0;  // Config::draft_tokens
  bool json = false;
  double body_limit_mib = 64;
  app.add_option("MODEL", model, "container directory")->required();
  app.add_option("--host", so.host, "bind address (default 127.0.0.1)");
  app.add_option("--port", so.port, "TCP port, 0 = any free port (default 8000)")
      ->check(CLI::Range(0, 65535));
  app.add_option("--model-id", so.model_id, "id reported by /v1/models (default: the directory name)");
  app.add_option("--api-key", so.api_key, "require the key KEY, as Authorization: Bearer KEY or x-api-key: KEY (default $WASTE_API_KEY)");
  app.add_option("--budget", budget, "RAM ceiling (SIZE, as for run)");
  // The spellings the other commands take (docs/CLI.md "Every option").
  app.add_option("-c,--ctx,--ctx-size", ctx, "context tokens (0 = 4096)");
  app.add_option("-t,--threads", threads, "compute threads (0 = engine default)");
  app.add_option("--cpus", cpus, "cpu list to run on");
  app.add_option("--cache", cache, "expert-cache policy: reuse-odds (default), lfru or lru")
      ->check(CLI::IsMember({"reuse-odds", "lfru", "lru"}));
  app.add_flag("--no-direct-io", no_direct_io, "read experts through the page cache");
  app.add_flag("--verify", verify, "checksum every expert record read");
  app.add_option("--usage", usage, "learned hotlist (default MODEL/usage.waste)");
  app.add_flag("--exclusive-open", exclusive, "refuse when another process has the container open");
  app.add_option("--max-tokens", so.default_max_tokens, "completion cap when a request sets none (default 4096)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{0xffffffff}));
  app.add_flag("--no-thinking", so.no_thinking, "answer without the think channel unless a request asks");
  app.add_option("--reasoning-budget", so.reasoning_budget,
                 "close the think channel after N tokens when a request names no cap "
                 "(reasoning.max_tokens; default -1 = no cap)")
      ->check(CLI::Range(-1, 0x7fffffff));
  app.add_flag("--vision", vision, "load the vision tower and accept images in requests");
  app.add_flag("--allow-local-images", so.allow_local_images,
               "let image parts name files on the server (off: base64 data: URLs only)");
  app.add_option("--parallel", so.parallel,
                 "requests served at once, each on its own conversation slot kept for prefix "
                 "reuse (default 1)")
      ->check(CLI::Range(1, 64));
  app.add_option("--prompt-cache", so.prompt_cache_dir,
                 "keep the conversation slots' prompt prefixes in DIR across restarts "
                 "(loaded at start, saved at exit), and the points of conversations no slot holds "
                 "(stored when a slot changes conversation, loaded back when one returns)")
      ->type_name("DIR");
  app.add_option("--prompt-cache-size", prompt_cache_size,
                 "disk the stored points of --prompt-cache may take (SIZE, default 4G; 0 = keep "
                 "only the slots' points at exit)");
  bool no_follow_on = false;
  app.add_flag("--no-follow-on", no_follow_on,
               "do not prefill a conversation's next turn after each reply (saves the work and "
               "a copy of the recurrent state per slot)");
  app.add_option("--earlier-points", so.earlier_points,
                 "restore points kept per conversation slot before its latest, so that a request "
                 "changing an earlier turn resumes from the last one before the change (default 2; "
                 "each a copy of the recurrent state, in the memory plan)")
      ->check(CLI::Range(0, 64));
  app.add_option("--draft", draft,
                 "guess up to N next tokens of each reply from the conversation so far and check "
                 "them in one pass (prompt lookup: faster where replies repeat their context, e.g. "
                 "an agent rewriting a file; default 0 = off; a copy of the recurrent state per "
                 "slot, in the memory plan)")
      ->check(CLI::Range(0, kMaxDraftTokens));
  app.add_option("--queue", so.queue, "requests that may wait for the engine before 503 (default 16)")
      ->check(CLI::Range(0, 100000));
  app.add_option("--body-limit", body_limit_mib, "largest request body in MiB (default 64)")
      ->check(CLI::Range(0.001, 4096.0));
  app.add_option("--cors", so.cors_origin, "send Access-Control-Allow-Origin: ORIGIN and answer preflights");
  app.add_option("--http-threads", so.http_threads, "connections served at once (default 16)")
      ->check(CLI::Range(2, 1024));
  app.add_flag("--plan", plan,
               "print the memory plan this start-up would use (--ctx, --budget, --parallel, "
               "--vision) and exit");
  app.add_flag("--json", json, "with --plan: the plan as JSON");
  std::vector<std::string> rest(args.begin() + 1, args.end());
  std::reverse(rest.begin(), rest.end());
  try {
    app.parse(rest);
  } catch (const CLI::ExtrasError& e) {
    // An unknown option gets the closest known one, as in the other commands.
    std::vector<std::string> names;
    for (const CLI::Option* opt : app.get_options()) {
      for (const std::string& n : opt->get_lnames()) names.push_back("--" + n);
    }
    for (const std::string& word : rest) {
      if (word.rfind("--", 0) != 0) continue;
      const std::string name = word.substr(0, word.find('='));
      if (std::find(names.begin(), names.end(), name) != names.end()) continue;
      const std::string close = Closest(name, names);
      std::fprintf(stderr, "waste serve: unknown option %s%s (waste serve --help lists them)\n",
                   name.c_str(), close.empty() ? "" : ("; did you mean " + close + "?").c_str());
      return 2;
    }
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  {
    Options where;
    where.positionals = {model};
    if (!CheckContainerPath(where)) return 1;  // the words `run` uses
  }
  auto size = ParseSize(budget);
  if (!size) {
    std::fprintf(stderr, "--budget: not a size: %s\n", budget.c_str());
    return 2;
  }
  if (auto cache_size = ParseSize(prompt_cache_size)) {
    so.prompt_cache_bytes = *cache_size;
  } else {
    std::fprintf(stderr, "--prompt-cache-size: not a size: %s\n", prompt_cache_size.c_str());
    return 2;
  }
  so.follow_on = !no_follow_on;
  // Each slot is a session with rewind marks at its restore points (copies
  // of the KDA state): the plan reserves room for all of them.
  const uint32_t sessions = static_cast<uint32_t>(so.parallel);
  if (plan) {
    // The same figures Engine::Open reserves below (PlanMemoryForOpen).
    Options o;
    o.command = Command::kPlan;
    o.positionals = {model};
    o.budget_bytes = *size;
    o.budget_given = true;
    o.ctx = ctx ? ctx : 4096;
    o.plan_sessions = sessions;
    o.plan_marks = server::RewindMarksFor(so);
    o.draft = draft;
    o.plan_vision = vision;
    o.json = json;
    return PlanCommand(o);
  }
  if (so.api_key.empty()) {
    if (const char* k = std::getenv("WASTE_API_KEY")) so.api_key = k;
  }
  if (so.model_id.empty()) so.model_id = DefaultModelId(model);
  so.container_dir = model;
  so.body_limit = static_cast<size_t>(body_limit_mib * 1024 * 1024);
  cfg.ram_budget_bytes = *size;
  cfg.ctx_tokens = ctx ? ctx : 4096;
  cfg.threads = threads;
  cfg.cpu_list = cpus;
  cfg.verify_records = verify;
  cfg.direct_io = no_direct_io ? 0 : -1;
  cfg.cache_policy = CachePolicyFromName(cache).value_or(CachePolicy::kDefault);
  cfg.usage_path = usage;
  cfg.exclusive_open = exclusive;
  cfg.vision = vision;
  cfg.max_sessions = sessions;
  cfg.rewind_marks = server::RewindMarksFor(so);
  cfg.draft_tokens = draft;
  so.vision = vision;

  auto engine = Engine::Open(model, cfg);
  if (!engine) {
    std::fprintf(stderr, "open: %s\n", engine.error().ToString().c_str());
    return 1;
  }
  auto server = server::HttpServer::Create(**engine, so);
  if (!server) {
    std::fprintf(stderr, "serve: %s\n", server.error().ToString().c_str());
    return 1;
  }
  auto port = (*server)->Bind();
  if (!port) {
    std::fprintf(stderr, "serve: %s\n", port.error().ToString().c_str());
    return 1;
  }
  const ModelInfo& info = (*engine)->info();
  std::printf("%s\n", BuildInfo().c_str());
  std::printf("model %s - %s, %d layers, %d experts, ctx %u\n", so.model_id.c_str(),
              info.arch.c_str(), info.layers, info.experts, info.ctx_tokens);
  std::printf("quantization: %s\n", info.quantization.c_str());
  std::printf("%s\n", (*server)->FormatDescription().c_str());
  if (vision) {
    std::printf("vision: image_url parts accepted (base64 data: URLs%s)\n",
                so.allow_local_images ? " and server paths" : "");
  }
  std::printf("parallel: %d request%s at once, %d conversation slot%s for prefix reuse\n",
              so.parallel, so.parallel == 1 ? "" : "s", so.parallel, so.parallel == 1 ? "" : "s");
  std::printf("follow-on prefill: %s\n",
              so.follow_on ? "on (after each chat reply the next turn is prefilled while idle)"
                           : "off");
  if (!so.prompt_cache_dir.empty()) {
    std::printf("prompt cache: %s\n", (*server)->PromptCacheDescription().c_str());
    for (const std::string& why : (*server)->prompt_cache_skipped()) {
      std::fprintf(stderr, "warning: prompt cache: not restored: %s\n", why.c_str());
    }
  }
  std::string shown = so.host.find(':') != std::string::npos ? "[" + so.host + "]" : so.host;
  std::printf("listening on http://%s:%d\n", shown.c_str(), *port);
  std::fflush(stdout);
  if (!IsLoopback(so.host) && so.api_key.empty()) {
    std::fprintf(stderr, "warning: listening on %s without --api-key: anyone who can reach it "
                         "can use the model\n", so.host.c_str());
  }
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  server::HttpServer* s = server->get();
  std::atomic<bool> served{false};
  std::thread watcher([s, &served] {
    while (!g_stop.load() && !served.load()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (served.load()) return;
    std::fprintf(stderr, "stopping (Ctrl-C again to exit at once)\n");
    s->Stop();
  });
  Status st = s->Serve();
  served = true;
  watcher.join();
  if (!so.prompt_cache_dir.empty()) {
    std::string saved = s->SavePromptCache();
    std::fprintf(stderr, "prompt cache: %s\n", saved.c_str());
    for (const std::string& why : s->prompt_cache_skipped()) {
      std::fprintf(stderr, "warning: prompt cache: not saved: %s\n", why.c_str());
    }
  }
  server->reset();
  return st.ok() ? 0 : 1;
}

}  // namespace waste::cli
