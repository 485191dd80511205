// info: opens the model (full load, budget resolution, hotlist warm) and
// describes it (ENGINE.md §1.6, §1.7).
#include <cstdio>

#include "commands.h"
#include "engine_setup.h"
#include "report.h"
#include "waste/waste.h"

namespace waste::cli {

int InfoCommand(const Options& o) {
  std::unique_ptr<Engine> engine = OpenEngine(o);
  if (!engine) return 1;
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
  }
  return 0;
}

}  // namespace waste::cli
