// CLI11 builds the subcommand table and formats the help; the values it
// would bind are never used (options.cc parses).
#include "help.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <memory>

#include "waste/waste.h"

namespace waste::cli {
namespace {

struct CommandDoc {
  Command command;
  const char* positionals;  // for the usage line
  const char* summary;
};

const CommandDoc kDocs[] = {
    {Command::kRun, "MODEL [PROMPT...]",
     "generate a reply (the chat format: MODEL/chat.json, else a built-in one its tokenizer fits; --raw: a plain continuation)"},
    {Command::kChat, "MODEL",
     "interactive conversation (line editing, history; /help lists the /commands)"},
    {Command::kEval, "MODEL [PROMPT...]", "most likely next tokens after the prompt (no sampling)"},
    {Command::kPerplexity, "MODEL FILE", "perplexity of the model on a text file (one pass, no BOS)"},
    {Command::kTokenize, "MODEL [TEXT...]", "text to token ids (special tokens recognised)"},
    {Command::kDetokenize, "MODEL [IDS...]", "token ids to text"},
    {Command::kBench, "MODEL",
     "prompt processing (pp) and generation (tg) speed apart, like llama-bench"},
    {Command::kPlan, "MODEL", "memory floor and recommended budget; reads manifest.json only"},
    {Command::kInfo, "MODEL", "open the model and describe it"},
    {Command::kVersion, "", "one line of build details (also waste --version, waste -v)"},
    {Command::kHelp, "[COMMAND]", "this list, or one command's options"},
};

const CommandDoc& DocFor(Command c) {
  for (const CommandDoc& d : kDocs) {
    if (d.command == c) return d;
  }
  return kDocs[0];
}

std::string Banner() {
  return std::string("waste ") + WASTE_VERSION_STRING +
         " — run huge Mixture-of-Experts models on ordinary machines: the dense trunk in RAM, "
         "routed experts streamed from NVMe";
}

// Sinks for CLI11's bindings; never read.
struct Sinks {
  std::string text;
  bool flag = false;
};

void AddOptions(CLI::App* sub, Command command, Sinks* sinks) {
  for (const OptionSpec& spec : OptionTable()) {
    if ((spec.used_by & Bit(command)) == 0) continue;  // refused, so not listed
    // CLI11 wants short names first: "-c,--ctx,--ctx-size".
    std::vector<std::string> spellings = SpellingsOf(spec);
    std::stable_partition(spellings.begin(), spellings.end(),
                          [](const std::string& s) { return s.rfind("--", 0) != 0; });
    std::string names;
    for (const std::string& s : spellings) names += (names.empty() ? "" : ",") + s;
    CLI::Option* opt;
    if (spec.value_name != nullptr) {
      opt = sub->add_option(names, sinks->text, HelpFor(spec, command))->type_name(spec.value_name);
    } else {
      opt = sub->add_flag(names, sinks->flag, HelpFor(spec, command));
    }
    opt->group("Options");
  }
}

}  // namespace

std::string GlobalHelp() try {
  CLI::App app(Banner(), "waste");
  app.require_subcommand(1);
  for (const CommandDoc& d : kDocs) app.add_subcommand(CommandName(d.command), d.summary);
  // These three parse their own options (cli/cmd_serve.cc, cmd_convert.cc,
  // cmd_verify.cc); `waste help NAME` runs `waste NAME --help`.
  app.add_subcommand("serve", "OpenAI-compatible HTTP server: waste serve MODEL [--port N]");
  app.add_subcommand("convert",
                     "published checkpoint (safetensors, Hugging Face layout) to a container: "
                     "waste convert SRC OUT");
  app.add_subcommand("verify",
                     "check a container's records and trunk (with --source: against the "
                     "checkpoint)");
  app.footer(
      "Options and positionals may follow the command in any order; --opt=value and -n8 work, "
      "`--` ends the options, prompt words are joined. Each command refuses options it does "
      "not use; `waste help COMMAND` lists its options.\n"
      "Sizes (--budget): K/M/G/T or KiB/MiB/GiB/TiB, all binary. docs/CLI.md has the details.\n"
      "Environment variables (WASTE_THREADS, WASTE_CPUS, WASTE_DIRECT, ...): docs/ENV.md.\n"
      "Exit status: 0 success, 1 the engine refused or failed, 2 usage error, 130 / 143 "
      "stopped by Ctrl-C / SIGTERM.");
  return app.help();
} catch (const std::exception&) {
  // CLI11 throws only for a malformed table, which the tests would catch.
  return Banner() + "\n" + UsageHint(Command::kNone) + "\n";
}

std::string CommandHelp(Command command) try {
  const CommandDoc& doc = DocFor(command);
  CLI::App app(Banner(), "waste");
  CLI::App* sub = app.add_subcommand(CommandName(command), doc.summary);
  Sinks sinks;
  std::string model, argument;
  std::string positionals = doc.positionals;
  if (positionals.rfind("MODEL", 0) == 0) {
    sub->add_option("MODEL", model, "container directory")->type_name("");
  }
  if (command == Command::kPerplexity) {
    sub->add_option("FILE", argument, "the text to score; - = stdin")->type_name("");
  }
  size_t open = positionals.find('[');
  if (open != std::string::npos) {
    std::string name = positionals.substr(open + 1, positionals.find(']') - open - 1);
    const char* what =
        command == Command::kHelp ? "a command"
        : command == Command::kDetokenize
            ? "ids separated by blanks or commas; - = stdin (default when piped)"
            : "text (several words are joined by spaces; `--` first if it starts with '-'); "
              "- = stdin (default when piped)";
    sub->add_option(name, argument, what)->type_name("");
  }
  AddOptions(sub, command, &sinks);
  return sub->help("waste");
} catch (const std::exception&) {
  return UsageHint(command) + "\n";
}

std::string UsageHint(Command command) {
  if (command == Command::kNone) {
    return "usage: waste COMMAND MODEL [ARG] [options]   (waste --help for the commands)";
  }
  const CommandDoc& doc = DocFor(command);
  std::string line = std::string("usage: waste ") + CommandName(command);
  if (*doc.positionals != '\0') line += std::string(" ") + doc.positionals;
  return line + " [options]   (waste " + CommandName(command) + " --help for more)";
}

}  // namespace waste::cli
