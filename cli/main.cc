// waste: the command table. Parses the command line (options.cc), prints
// help or a usage error, and hands the options to one command.
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "engine_setup.h"
#include "help.h"
#include "options.h"

namespace waste::cli {
namespace {

struct Entry {
  Command command;
  int (*fn)(const Options&);
};

constexpr Entry kTable[] = {
    {Command::kRun, RunCommand},
    {Command::kChat, ChatCommand},
    {Command::kEval, EvalCommand},
    {Command::kPerplexity, PerplexityCommand},
    {Command::kTokenize, TokenizeCommand},
    {Command::kDetokenize, DetokenizeCommand},
    {Command::kBench, BenchCommand},
    {Command::kPlan, PlanCommand},
    {Command::kInfo, InfoCommand},
    {Command::kVersion, VersionCommand},
};

// Commands that parse their own options with CLI11 in their own files
// (their option sets are large and not shared); `args` starts at the name.
bool IsSelfParsed(const std::string& name) {
  return name == "convert" || name == "verify" || name == "serve";
}

int RunSelfParsed(const std::vector<std::string>& args) {
  std::vector<std::string> rest(args.begin() + 1, args.end());
  if (args[0] == "convert") return ConvertMain(rest);
  if (args[0] == "verify") return VerifyMain(rest);
  return ServeMain(args);
}

int Main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (!args.empty() && IsSelfParsed(args[0])) return RunSelfParsed(args);
  // `waste help convert` is `waste convert --help`.
  if (args.size() == 2 && args[0] == "help" && IsSelfParsed(args[1])) {
    return RunSelfParsed({args[1], "--help"});
  }
  ParseOutcome parsed = ParseCommandLine(args);
  switch (parsed.kind) {
    case ParseOutcome::Kind::kHelp: {
      std::string text = parsed.options.command == Command::kNone
                             ? GlobalHelp()
                             : CommandHelp(parsed.options.command);
      std::fputs(text.c_str(), stdout);
      return 0;
    }
    case ParseOutcome::Kind::kUsageError:
      if (!parsed.message.empty() &&
          std::find(args.begin(), args.end(), "--json") != args.end()) {
        PrintJsonError("usage", parsed.message);  // stdout carries one JSON object
        return 2;
      }
      if (parsed.message.empty()) {  // no arguments at all
        std::fputs(GlobalHelp().c_str(), stderr);
      } else if (parsed.options.command == Command::kNone) {
        std::fprintf(stderr, "%s\n", parsed.message.c_str());  // already says "try --help"
      } else {
        std::fprintf(stderr, "%s\n%s\n", parsed.message.c_str(),
                     UsageHint(parsed.options.command).c_str());
      }
      return 2;
    case ParseOutcome::Kind::kOk:
      break;
  }
  for (const Entry& e : kTable) {
    if (e.command == parsed.options.command) return e.fn(parsed.options);
  }
  return 2;
}

}  // namespace
}  // namespace waste::cli

int main(int argc, char** argv) { return waste::cli::Main(argc, argv); }
