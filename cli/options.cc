// Hand-written scanner for ENGINE.md §1.2. CLI11 (help.cc) renders the help
// text from the same table, but it cannot reproduce the reference's grammar
// and messages (`-5` and `--` are errors, `--temp -1` reaches the range
// check, `--temp --budget 8G` is a missing value), so parsing is done here.
#include "options.h"

#include <cctype>
#include <climits>
#include <cmath>
#include <cstdlib>

namespace waste::cli {
namespace {

constexpr unsigned kOpens = Bit(Command::kRun) | Bit(Command::kChat) | Bit(Command::kEval) |
                            Bit(Command::kPerplexity) |
                            Bit(Command::kTokenize) | Bit(Command::kDetokenize) |
                            Bit(Command::kBench) | Bit(Command::kInfo);
constexpr unsigned kGenerates = Bit(Command::kRun) | Bit(Command::kChat) | Bit(Command::kBench);
constexpr unsigned kReadsPrompt =
    Bit(Command::kRun) | Bit(Command::kEval) | Bit(Command::kTokenize) | Bit(Command::kDetokenize);
constexpr unsigned kJson = Bit(Command::kEval) | Bit(Command::kPerplexity) | Bit(Command::kTokenize) |
                           Bit(Command::kDetokenize) | Bit(Command::kPlan) | Bit(Command::kInfo) |
                           Bit(Command::kBench) | Bit(Command::kRun);

// The reference's limit on --image (its fixed queue).
constexpr size_t kMaxImages = 32;

bool AllDigits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (c < '0' || c > '9') return false;
  }
  return true;
}

std::optional<uint64_t> ParseU64(std::string_view s) {
  if (!AllDigits(s)) return std::nullopt;
  uint64_t v = 0;
  for (char c : s) {
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return std::nullopt;
    v = v * 10 + d;
  }
  return v;
}

std::optional<uint32_t> ParseU32(std::string_view s) {
  std::optional<uint64_t> v = ParseU64(s);
  if (!v || *v > UINT32_MAX) return std::nullopt;
  return static_cast<uint32_t>(*v);
}

std::optional<int> ParseNonNegInt(std::string_view s) {
  std::optional<uint64_t> v = ParseU64(s);
  if (!v || *v > static_cast<uint64_t>(INT_MAX)) return std::nullopt;
  return static_cast<int>(*v);
}

// Length of a decimal float at the start of `s` ([+-] not allowed: sizes
// and the sampler values that take this path have no sign in their
// grammar except --temp/--top-p, handled by ParseFloat): digits, optional
// fraction, optional exponent; at least one digit. 0 when none.
size_t DecimalPrefix(std::string_view s) {
  size_t i = 0, digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  }
  if (digits == 0) return 0;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    size_t j = i + 1;
    if (j < s.size() && (s[j] == '+' || s[j] == '-')) ++j;
    size_t exp_digits = 0;
    while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j, ++exp_digits;
    if (exp_digits > 0) i = j;
  }
  return i;
}

// A finite decimal float, optionally signed; "nan", "inf" and hex refused.
std::optional<float> ParseFloat(std::string_view s) {
  std::string_view body = s;
  if (!body.empty() && (body[0] == '-' || body[0] == '+')) body.remove_prefix(1);
  size_t len = DecimalPrefix(body);
  if (len == 0 || len != body.size()) return std::nullopt;
  std::string copy(s);
  double v = std::strtod(copy.c_str(), nullptr);
  float f = static_cast<float>(v);
  if (!std::isfinite(v) || !std::isfinite(f)) return std::nullopt;
  return f;
}

bool IsBlank(char c) { return c == ' ' || c == '\t'; }

// A word that looks like an option, so it cannot be a value (§1.2): '-'
// followed by anything but a digit or '.'.
bool LooksLikeOption(const std::string& w) {
  return w.size() > 1 && w[0] == '-' &&
         !(std::isdigit(static_cast<unsigned char>(w[1])) || w[1] == '.');
}

const OptionSpec* FindOption(const std::string& word) {
  for (const OptionSpec& spec : OptionTable()) {
    if (word == spec.name || (spec.alias != nullptr && word == spec.alias)) return &spec;
  }
  return nullptr;
}

// Applies a value-taking option; false when the value is malformed.
bool ApplyValue(const std::string& name, const std::string& v, Options* o, std::string* error) {
  if (name == "--budget") {
    std::optional<uint64_t> bytes = ParseSize(v);
    if (!bytes) return false;
    o->budget_bytes = *bytes;
    o->budget_given = true;
  } else if (name == "--ctx") {
    std::optional<uint32_t> n = ParseU32(v);
    if (!n) return false;
    o->ctx = *n;
  } else if (name == "-n") {
    std::optional<uint32_t> n = ParseU32(v);
    if (!n) return false;
    o->n_tokens = *n;
    o->n_given = true;
  } else if (name == "--temp") {
    std::optional<float> f = ParseFloat(v);
    if (!f) return false;
    o->temp = *f;
  } else if (name == "--top-p") {
    std::optional<float> f = ParseFloat(v);
    if (!f) return false;
    o->top_p = *f;
  } else if (name == "--top-k") {
    std::optional<int> n = ParseNonNegInt(v);
    if (!n) return false;
    o->top_k = *n;
    o->top_k_given = true;
  } else if (name == "--seed") {
    std::optional<uint64_t> n = ParseU64(v);
    if (!n) return false;
    o->seed = *n;
  } else if (name == "--threads") {
    std::optional<int> n = ParseNonNegInt(v);
    if (!n) return false;
    o->threads = *n;
  } else if (name == "--cpus") {
    o->cpus = v;  // validated by the engine at open (§1.3)
    o->cpus_given = true;
  } else if (name == "--stop") {
    o->stop = v;
    o->stop_given = true;
  } else if (name == "--file") {
    o->file = v;
    o->file_given = true;
  } else if (name == "--system") {
    o->system = v;
  } else if (name == "--image") {
    if (o->images.size() >= kMaxImages) {
      *error = "at most 32 images";
      return false;
    }
    o->images.push_back(v);
  } else if (name == "--usage") {
    o->usage_path = v;
  } else if (name == "--cache") {
    if (v == "lfru") {
      o->cache_policy = CachePolicy::kLfru;
    } else if (v == "lru") {
      o->cache_policy = CachePolicy::kLru;
    } else {
      return false;
    }
  } else if (name == "--logits-out") {
    o->logits_out = v;
  } else if (name == "--ids") {
    std::string bad;
    std::optional<std::vector<int>> ids = ParseIdList(v, &bad);
    if (!ids) {
      *error = "invalid token id: " + bad;
      return false;
    }
    o->ids = std::move(*ids);
    o->ids_given = true;
  } else if (name == "--prompt-tokens") {
    std::optional<uint32_t> n = ParseU32(v);
    if (!n) return false;
    o->prompt_tokens = *n;
  } else {
    return false;
  }
  return true;
}

void ApplyFlag(const std::string& name, Options* o) {
  struct Flag {
    const char* name;
    bool Options::*field;
    bool value;
  };
  static const Flag kFlags[] = {
      {"--raw", &Options::raw, true},
      {"--json", &Options::json, true},
      {"--quiet", &Options::quiet, true},
      {"--learn", &Options::learn, true},
      {"--verify", &Options::verify, true},
      {"--exclusive-open", &Options::exclusive_open, true},
      {"--no-direct-io", &Options::no_direct_io, true},
      {"--plain", &Options::plain, true},
      {"--markup", &Options::plain, false},
  };
  for (const Flag& f : kFlags) {
    if (name == f.name) o->*f.field = f.value;
  }
}

// §1.3: after parsing, in this order: temp, top-p, top-k, ctx, -n, threads.
std::string RangeCheck(const Options& o) {
  if (!(o.temp >= 0.0f)) return "--temp must be >= 0";
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) return "--top-p must be in (0, 1]";
  if (o.top_k < 0) return "--top-k must be >= 0";
  if (o.ctx == 0) return "--ctx must be > 0";
  if (o.n_tokens == 0) return "-n must be > 0";
  if (o.threads < 0) return "--threads must be >= 0";
  return "";
}

ParseOutcome UsageError(std::string message, Options options) {
  ParseOutcome out;
  out.kind = ParseOutcome::Kind::kUsageError;
  out.message = std::move(message);
  out.options = std::move(options);
  return out;
}

}  // namespace

const std::vector<OptionSpec>& OptionTable() {
  static const std::vector<OptionSpec> table = {
      {"--budget", nullptr, "SIZE",
       "RAM budget for everything the engine allocates: bytes or 512M, 1.5G, 2 GB (binary "
       "units); 0 = pick one from usable RAM",
       kOpens | Bit(Command::kPlan)},
      {"--ctx", nullptr, "N", "context length in tokens (default 4096)",
       kOpens | Bit(Command::kPlan)},
      {"-n", nullptr, "N", "tokens to generate (default 128; bench: 64)", kGenerates},
      {"--temp", nullptr, "F", "sampling temperature, 0 = greedy (default 0)", kGenerates},
      {"--top-p", nullptr, "F", "nucleus mass in (0, 1] (default 1)", kGenerates},
      {"--top-k", nullptr, "N",
       "keep the N most likely tokens, 0 = off; eval: rows shown (default 10)",
       kGenerates | Bit(Command::kEval)},
      {"--seed", nullptr, "N", "sampling seed, 0 = the fixed default", kGenerates},
      {"--threads", nullptr, "N", "compute threads, 0 = WASTE_THREADS or every usable CPU", kOpens},
      {"--cpus", nullptr, "LIST", "bind compute threads to CPUs, e.g. 0-5,8 (Linux, Windows)",
       kOpens},
      {"--stop", nullptr, "STR",
       "stop when the output contains STR (default: the chat "
       "template's end of turn)",
       Bit(Command::kRun) | Bit(Command::kChat)},
      {"--file", nullptr, "F", "read the prompt (ids for detokenize) from F; - = stdin",
       kReadsPrompt},
      {"--system", nullptr, "STR", "system prompt (used with a chat template)",
       Bit(Command::kRun) | Bit(Command::kChat)},
      {"--image", nullptr, "F", "attach an image (repeatable, at most 32; needs a vision tower)",
       Bit(Command::kRun) | Bit(Command::kChat) | Bit(Command::kEval)},
      {"--raw", nullptr, nullptr, "ignore the container's chat.json: continue the text as is",
       Bit(Command::kRun) | Bit(Command::kChat)},
      {"--json", nullptr, nullptr, "print one JSON object on stdout and nothing else", kJson},
      {"--quiet", "-q", nullptr, "no echo, notes or statistics", kGenerates},
      {"--learn", nullptr, nullptr, "save the expert hotlist (usage.waste) at the end",
       Bit(Command::kRun)},
      {"--verify", nullptr, nullptr, "check the crc32 of every expert record read", kOpens},
      {"--exclusive-open", nullptr, nullptr,
       "take an advisory lock on the container; fail if another process holds it", kOpens},
      {"--no-direct-io", nullptr, nullptr,
       "read experts through the page cache (default: bypass it)", kOpens},
      {"--usage", nullptr, "PATH", "hotlist file (default MODEL/usage.waste)", kOpens},
      {"--cache", nullptr, "lru|lfru", "expert cache replacement policy (default lfru)", kOpens},
      {"--logits-out", nullptr, "FILE", "write the full logits as raw little-endian f32",
       Bit(Command::kEval)},
      {"--ids", nullptr, "\"1 2 3\"", "use these token ids as the prompt (no tokenizer needed)",
       Bit(Command::kRun) | Bit(Command::kEval) | Bit(Command::kBench) | Bit(Command::kDetokenize)},
      {"--prompt-tokens", nullptr, "N", "bench: prompt length in tokens (fixed prompt repeated)",
       Bit(Command::kBench)},
      {"--markup", nullptr, nullptr, "tokenize: recognise special tokens (the default)",
       Bit(Command::kTokenize)},
      {"--plain", nullptr, nullptr, "tokenize: treat special-token text as ordinary text",
       Bit(Command::kTokenize)},
  };
  return table;
}

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> all = {
      Command::kRun,   Command::kChat, Command::kEval, Command::kPerplexity, Command::kTokenize, Command::kDetokenize,
      Command::kBench, Command::kPlan, Command::kInfo, Command::kVersion};
  return all;
}

const char* CommandName(Command c) {
  switch (c) {
    case Command::kRun:
      return "run";
    case Command::kChat:
      return "chat";
    case Command::kEval:
      return "eval";
    case Command::kPerplexity:
      return "perplexity";
    case Command::kTokenize:
      return "tokenize";
    case Command::kDetokenize:
      return "detokenize";
    case Command::kBench:
      return "bench";
    case Command::kPlan:
      return "plan";
    case Command::kInfo:
      return "info";
    case Command::kVersion:
      return "version";
    case Command::kNone:
      break;
  }
  return "";
}

std::optional<Command> CommandFromName(std::string_view name) {
  for (Command c : AllCommands()) {
    if (name == CommandName(c)) return c;
  }
  return std::nullopt;
}

std::optional<uint64_t> ParseSize(std::string_view s) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  size_t len = DecimalPrefix(s);
  if (len == 0) return std::nullopt;
  double value = std::strtod(std::string(s.substr(0, len)).c_str(), nullptr);
  std::string_view rest = s.substr(len);
  while (!rest.empty() && IsBlank(rest.front())) rest.remove_prefix(1);
  double mult = 1;
  if (!rest.empty()) {
    switch (rest.front()) {
      case 'k':
      case 'K':
        mult = 1024.0;
        rest.remove_prefix(1);
        break;
      case 'm':
      case 'M':
        mult = 1024.0 * 1024;
        rest.remove_prefix(1);
        break;
      case 'g':
      case 'G':
        mult = 1024.0 * 1024 * 1024;
        rest.remove_prefix(1);
        break;
      default:
        break;
    }
  }
  if (!rest.empty() && (rest.front() == 'b' || rest.front() == 'B')) rest.remove_prefix(1);
  if (!rest.empty()) return std::nullopt;
  double bytes = value * mult;
  // 2^64: the first double a uint64_t cannot hold.
  if (!std::isfinite(bytes) || bytes < 0 || bytes >= 18446744073709551616.0) return std::nullopt;
  return static_cast<uint64_t>(bytes);
}

std::optional<std::vector<int>> ParseIdList(std::string_view text, std::string* bad) {
  std::vector<int> ids;
  size_t i = 0;
  auto is_sep = [](char c) { return c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r'; };
  while (i < text.size()) {
    while (i < text.size() && is_sep(text[i])) ++i;
    size_t j = i;
    while (j < text.size() && !is_sep(text[j])) ++j;
    if (j == i) break;
    std::string_view word = text.substr(i, j - i);
    std::optional<int> id = ParseNonNegInt(word);
    if (!id) {
      if (bad != nullptr) *bad = std::string(word);
      return std::nullopt;
    }
    ids.push_back(*id);
    i = j;
  }
  return ids;
}

ParseOutcome ParseCommandLine(const std::vector<std::string>& args) {
  Options o;
  if (args.empty()) return UsageError("", o);
  const std::string& word = args[0];
  if (word == "-h" || word == "--help") {
    ParseOutcome out;
    out.kind = ParseOutcome::Kind::kHelp;
    return out;
  }
  std::optional<Command> command = CommandFromName(word);
  if (!command) return UsageError("unknown command '" + word + "' (try --help)", o);
  o.command = *command;
  o.command_name = word;

  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.size() <= 1 || a[0] != '-') {  // includes a lone "-" (stdin)
      if (o.positionals.size() >= 2) return UsageError("unexpected argument \"" + a + "\"", o);
      o.positionals.push_back(a);
      continue;
    }
    if (a == "-h" || a == "--help") {
      ParseOutcome out;
      out.kind = ParseOutcome::Kind::kHelp;
      out.options = std::move(o);
      return out;
    }
    const OptionSpec* spec = FindOption(a);
    if (spec == nullptr) return UsageError("unknown option " + a, o);
    if (spec->value_name == nullptr) {
      ApplyFlag(spec->name, &o);
      continue;
    }
    if (i + 1 >= args.size() || LooksLikeOption(args[i + 1])) {
      return UsageError(a + " needs a value", o);
    }
    const std::string& value = args[++i];
    std::string error;
    if (!ApplyValue(spec->name, value, &o, &error)) {
      if (error.empty()) error = "invalid value for " + a + ": " + value;
      return UsageError(error, o);
    }
  }

  std::string range = RangeCheck(o);
  if (!range.empty()) return UsageError(range, o);
  if (o.command == Command::kBench && !o.n_given) o.n_tokens = 64;
  if (o.command != Command::kVersion && o.positionals.empty()) {
    return UsageError("missing MODEL (the container directory)", o);
  }
  ParseOutcome out;
  out.options = std::move(o);
  return out;
}

}  // namespace waste::cli
