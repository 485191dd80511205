// Help and usage text, rendered by CLI11 from the option table in options.h
// and the subcommand table here (one line per command).
#pragma once

#include <string>

#include "options.h"

namespace waste::cli {

// `waste --help`: banner, usage, the commands.
std::string GlobalHelp();
// `waste CMD --help`: what CMD does, its positionals, every option (the ones
// CMD reads first, then the ones it accepts and ignores).
std::string CommandHelp(Command command);
// The short reminder printed after a usage error.
std::string UsageHint(Command command);

}  // namespace waste::cli
