// One function per command; each returns the process exit status
// (0 success, 1 the engine refused or failed, 2 usage; ENGINE.md §1.8).
#pragma once

#include <string>
#include <vector>

#include "options.h"

namespace waste::cli {

int RunCommand(const Options& options);
int ChatCommand(const Options& options);
int EvalCommand(const Options& options);
int PerplexityCommand(const Options& options);
int TokenizeCommand(const Options& options);
int DetokenizeCommand(const Options& options);
int BenchCommand(const Options& options);
int PlanCommand(const Options& options);
int InfoCommand(const Options& options);
int VersionCommand(const Options& options);
// convert / verify parse their own arguments (everything after the command).
int ConvertMain(const std::vector<std::string>& args);
int VerifyMain(const std::vector<std::string>& args);
// `waste serve` parses its own options (cmd_serve.cc); `args` excludes argv[0].
int ServeMain(const std::vector<std::string>& args);

}  // namespace waste::cli
