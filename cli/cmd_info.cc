// info: opens the model (full load, budget resolution, hotlist warm) and
// describes it (ENGINE.md §1.6, §1.7).
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "engine_setup.h"
#include "report.h"
#include "waste/waste.h"

namespace waste::cli {

// The chat format `run` and `chat` frame prompts with: its name for
// --json ("chat.json", "kimi", "deepseek", "none") and the text line.
// `serve` prefers K3's XTML when the tokenizer has its four markers.
struct ChatFormatFacts {
  std::string name, line;
};

ChatFormatFacts DescribeChatFormat(const Engine& engine, const std::string& dir) {
  if (!engine.info().has_tokenizer) return {"none", "none (no tokenizer)"};
  bool xtml = true;
  for (const char* marker : {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"}) {
    Result<std::vector<int>> ids = engine.Tokenize(marker, /*markup=*/true, /*add_bos=*/false);
    xtml = xtml && ids && ids->size() == 1;
  }
  const std::string serve = xtml ? "; serve: K3 XTML" : "";
  Result<std::optional<ChatTemplate>> t = engine.FindChatTemplate();
  if (!t) return {"none", "unreadable: " + t.error().message() + serve};
  if (!t->has_value() || !(*t)->usable()) return {"none", "none (plain continuation)" + serve};
  return {(*t)->stock_name.empty() ? "chat.json" : (*t)->stock_name, (*t)->Source(dir) + serve};
}

int InfoCommand(const Options& o) {
  std::unique_ptr<Engine> engine = OpenEngine(o);
  if (!engine) return 1;
  const ChatFormatFacts chat_format = DescribeChatFormat(*engine, o.model());
  const bool direct_io = engine->stats().direct_io;
  const Stats stats = engine->stats();
  if (o.json) {
    Json j = InfoJson(WASTE_VERSION_STRING, engine->info(), engine->memory_used(),
                      engine->backend_name(), engine->threads(), direct_io);
    j["io_backend"] = stats.io_backend;
    j["io_threads"] = stats.io_threads;
    j["io_depth"] = stats.io_depth;
    j["io_fixed_buffers"] = stats.io_fixed_buffers;
    j["cache_policy"] = stats.cache_policy;
    j["huge_pages"] = stats.huge_pages;
    j["warm_reads"] = stats.warm_reads;
    j["chat_format"] = chat_format.name;
    std::printf("%s\n", DumpJson(j).c_str());
  } else {
    std::fputs(InfoText(BuildInfo(), engine->info(), engine->memory_used(), engine->backend_name(),
                        engine->threads(), direct_io)
                   .c_str(),
               stdout);
    // Expert streaming: how records are read (ENGINE.md §5.3-5.4, §5.8).
    std::printf("  %-14s%s, %d thread%s, depth %d%s, cache bypass %s\n", "expert reads",
                stats.io_backend.c_str(), stats.io_threads, stats.io_threads == 1 ? "" : "s",
                stats.io_depth, stats.io_fixed_buffers ? ", fixed buffers" : "",
                direct_io ? "on" : "off (buffered reads)");
    std::printf("  %-14s%s, %llu slots%s, %llu warmed from the hotlist\n", "cache policy",
                stats.cache_policy.c_str(),
                static_cast<unsigned long long>(engine->memory_used().slots),
                stats.huge_pages ? " in huge pages" : "",
                static_cast<unsigned long long>(stats.warm_reads));
    std::printf("  %-14s%s\n", "chat format", chat_format.line.c_str());
  }
  return 0;
}

}  // namespace waste::cli
