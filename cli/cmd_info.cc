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
  if (o.json) {
    std::printf("%s\n",
                DumpJson(InfoJson(WASTE_VERSION_STRING, engine->info(), engine->memory_used(),
                                  engine->backend_name(), engine->threads(), direct_io))
                    .c_str());
  } else {
    std::fputs(InfoText(BuildInfo(), engine->info(), engine->memory_used(), engine->backend_name(),
                        engine->threads(), direct_io)
                   .c_str(),
               stdout);
  }
  return 0;
}

}  // namespace waste::cli
