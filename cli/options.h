// The command line: the command word, then options and positionals in any
// order (docs/CLI.md). llama.cpp/ollama habits work: --opt=value, -n8,
// aliases (-p -m -c -t -s -f, --n-predict, --temperature, --ctx-size), `--`
// ends the options, several prompt words are joined by spaces. Options a
// command does not read are refused; unknown words get a "did you mean".
// No engine calls here.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
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
  kVersion,
  kHelp  // `waste help [COMMAND]`
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
  uint32_t plan_sessions = 1;  // serve --plan: the sessions the server opens (--parallel)
  int plan_marks = 0;          // serve --plan: rewind marks each slot keeps
  bool plan_vision = false;    // serve --plan --vision: the tower counted as open counts it
  uint32_t n_tokens = 128;  // bench: 64 unless -n was given
  bool n_given = false;
  float temp = 0.0f;
  float top_p = 1.0f;
  int top_k = 0;  // eval: rows shown (default 10)
  bool top_k_given = false;
  int draft = 0;              // run, chat, bench: prompt-lookup drafting (Config::draft_tokens)
  int reasoning_budget = -1;  // run, chat: cap on <think> reasoning (-1: none)
  uint64_t seed = 0;
  int threads = 0;
  std::string cpus;
  bool cpus_given = false;
  std::vector<std::string> stops;  // --stop, repeatable (all apply)
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
  CachePolicy cache_policy = CachePolicy::kDefault;
  std::string logits_out;
  std::string grammar_file;      // run --grammar (GBNF)
  std::string json_schema_file;  // run --json-schema
  std::string predict_file;      // run --predict: the reply's expected text (drafting quotes it)
  std::vector<int> ids;
  bool ids_given = false;
  uint32_t prompt_tokens = 0;  // bench: 0 = the fixed prompt as is
  bool plain = false;          // tokenize without recognising specials
  std::string prompt;          // -p/--prompt
  bool prompt_given = false;
  std::string model_option;    // -m/--model
  bool model_given = false;
  bool verbose = false;        // -v after a command: seed, timings detail
  bool seed_given = false;
  // Sampling beyond temperature / top-k / top-p (docs/CLI.md).
  float min_p = 0.0f;
  float repeat_penalty = 1.0f;
  int repeat_last_n = 64;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  bool ignore_eos = false;
  std::vector<std::pair<int, float>> logit_bias;
  // bench
  int reps = 1;
  std::string output_format;  // bench -o: md (default), csv, json

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

// Size grammar: decimal float, optional unit K/M/G/T (also KB/KiB, MB/MiB,
// ..., any case; all binary: 1K = 1024), or a lone B; blanks around the
// unit; nullopt when malformed, negative, not finite or beyond 2^64-1 bytes.
// `had_unit` (optional) tells whether a unit was written.
std::optional<uint64_t> ParseSize(std::string_view text, bool* had_unit = nullptr);

// --cache's names: reuse-odds, lfru, lru (run, chat, bench and serve alike);
// nullopt for any other word.
std::optional<CachePolicy> CachePolicyFromName(std::string_view name);

// Token ids separated by blanks, commas, tabs or newlines. On failure
// `bad` receives the offending word.
std::optional<std::vector<int>> ParseIdList(std::string_view text, std::string* bad);

// The option table, shared with the help text.
struct OptionSpec {
  const char* name;        // "--budget", "-n"
  const char* alias;       // other spellings, comma-separated ("-q"), else nullptr
  const char* value_name;  // "SIZE"; nullptr for a flag
  // "TEXT" or "TEXT; bench: TEXT FOR BENCH; eval: ...": a command named
  // after "; " sees its own text instead of the first (HelpFor).
  const char* help;
  unsigned used_by;  // Bit(Command) mask of commands that read it
};
const std::vector<OptionSpec>& OptionTable();
// The help text of `spec` as `command` shows it (see OptionSpec::help).
std::string HelpFor(const OptionSpec& spec, Command command);
// Every spelling of `spec` (name first, then the aliases).
std::vector<std::string> SpellingsOf(const OptionSpec& spec);

// The closest of `candidates` to `word` (edit distance at most 2, or a
// third of the word), or "" when none is close.
std::string Closest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace waste::cli
