// The command line of ENGINE.md §1: the command word, then options and
// positionals in any order, parsed by the exact grammar of §1.2 (messages
// and exit codes are part of the contract). No engine calls here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "waste/config.h"

namespace waste::cli {

enum class Command {
  kNone,
  kRun,
  kChat,
  kEval,
  kPerplexity,
  kTokenize,
  kDetokenize,
  kBench,
  kPlan,
  kInfo,
  kVersion
};

// Bit per command, for "which commands use this option" (help grouping).
inline constexpr unsigned Bit(Command c) { return 1u << static_cast<unsigned>(c); }

struct Options {
  Command command = Command::kNone;
  std::string command_name;
  std::vector<std::string> positionals;  // MODEL, then the command's argument

  uint64_t budget_bytes = 0;
  bool budget_given = false;
  uint32_t ctx = 4096;
  uint32_t n_tokens = 128;  // bench: 64 unless -n was given
  bool n_given = false;
  float temp = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;  // eval: rows shown (default 10)
  bool top_k_given = false;
  uint64_t seed = 0;
  int threads = 0;
  std::string cpus;
  bool cpus_given = false;
  std::string stop;
  bool stop_given = false;
  std::string file;
  bool file_given = false;
  std::string system;
  std::vector<std::string> images;
  bool raw = false;
  bool json = false;
  bool quiet = false;
  bool learn = false;
  bool verify = false;
  bool exclusive_open = false;
  // waste extensions
  bool no_direct_io = false;
  std::string usage_path;
  CachePolicy cache_policy = CachePolicy::kLfru;
  std::string logits_out;
  std::vector<int> ids;
  bool ids_given = false;
  uint32_t prompt_tokens = 0;  // bench: 0 = the fixed prompt as is
  bool plain = false;          // tokenize without recognising specials

  const std::string& model() const { return positionals[0]; }
  bool has_argument() const { return positionals.size() >= 2; }
  const std::string& argument() const { return positionals[1]; }
};

struct ParseOutcome {
  enum class Kind {
    kOk,          // run the command
    kHelp,        // print help for `options.command` (kNone = global), exit 0
    kUsageError,  // print `message` and the usage hint, exit 2
  };
  Kind kind = Kind::kOk;
  std::string message;
  Options options;
};

// `args` excludes argv[0].
ParseOutcome ParseCommandLine(const std::vector<std::string>& args);

// Command word <-> enum.
std::optional<Command> CommandFromName(std::string_view name);
const char* CommandName(Command c);
// The commands in the order help lists them.
const std::vector<Command>& AllCommands();

// --budget grammar: decimal float, optional k/m/g (binary) and optional b,
// blanks around the suffix; nullopt when malformed, negative, not finite or
// beyond 2^64-1 bytes.
std::optional<uint64_t> ParseSize(std::string_view text);

// Token ids separated by blanks, commas, tabs or newlines. On failure
// `bad` receives the offending word.
std::optional<std::vector<int>> ParseIdList(std::string_view text, std::string* bad);

// The option table, shared with the help text.
struct OptionSpec {
  const char* name;        // "--budget", "-n"
  const char* alias;       // "-q" for --quiet, else nullptr
  const char* value_name;  // "SIZE"; nullptr for a flag
  const char* help;
  unsigned used_by;  // Bit(Command) mask of commands that read it
};
const std::vector<OptionSpec>& OptionTable();

}  // namespace waste::cli
