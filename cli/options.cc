// Hand-written scanner (docs/CLI.md "Grammar"). CLI11 (help.cc) renders the
// help text from the same table; the scanning is ours because some rules
// are not CLI11's: a value that looks like a negative number is a value
// (`--temp -1` reaches the range check), `--temp --budget 8G` is a missing
// value rather than "--budget" taken as the temperature, and every message
// is ours. Beyond that it follows the common habits: --opt=value, -n8,
// aliases, `--`, prompt words joined, "did you mean".
#include "options.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "waste/types.h"

namespace waste::cli {
namespace {

// Commands that open the model's weights (tokenize and detokenize read the
// tokenizer files only, so the engine's options mean nothing to them).
constexpr unsigned kOpens = Bit(Command::kRun) | Bit(Command::kChat) | Bit(Command::kEval) |
                            Bit(Command::kPerplexity) | Bit(Command::kBench) | Bit(Command::kInfo);
constexpr unsigned kGenerates = Bit(Command::kRun) | Bit(Command::kChat) | Bit(Command::kBench);
constexpr unsigned kReadsPrompt =
    Bit(Command::kRun) | Bit(Command::kEval) | Bit(Command::kTokenize) | Bit(Command::kDetokenize);
constexpr unsigned kJson = Bit(Command::kEval) | Bit(Command::kPerplexity) | Bit(Command::kTokenize) |
                           Bit(Command::kDetokenize) | Bit(Command::kPlan) | Bit(Command::kInfo) |
                           Bit(Command::kBench) | Bit(Command::kRun);
// Commands that name a container; kSizes: those a budget and a context size mean something to.
constexpr unsigned kModel =
    kOpens | Bit(Command::kPlan) | Bit(Command::kTokenize) | Bit(Command::kDetokenize);
constexpr unsigned kSizes = kOpens | Bit(Command::kPlan);
constexpr unsigned kRunChat = Bit(Command::kRun) | Bit(Command::kChat);
// Commands whose second positional is text (or ids): words are joined.
constexpr unsigned kTakesArgument = kReadsPrompt;

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
    for (const std::string& s : SpellingsOf(spec)) {
      if (word == s) return &spec;
    }
  }
  return nullptr;
}

// "ID+BIAS", "ID-BIAS", "ID=BIAS" or "ID:BIAS"; BIAS may be "-inf" (never)
// after '=' / ':'.
bool ParseLogitBias(const std::string& v, std::pair<int, float>* out) {
  size_t i = 0;
  while (i < v.size() && std::isdigit(static_cast<unsigned char>(v[i]))) ++i;
  if (i == 0 || i == v.size()) return false;
  std::optional<int> id = ParseNonNegInt(std::string_view(v).substr(0, i));
  if (!id) return false;
  std::string rest = v.substr(i);
  if (rest[0] == '=' || rest[0] == ':') rest.erase(0, 1);
  if (rest == "-inf" || rest == "-INF") {
    *out = {*id, -INFINITY};
    return true;
  }
  std::optional<float> bias = ParseFloat(rest);
  if (!bias) return false;
  *out = {*id, *bias};
  return true;
}

// Applies a value-taking option (by its canonical name); false when the
// value is malformed (`error` may then hold a better message).
bool ApplyValue(const std::string& name, const std::string& v, Options* o, std::string* error) {
  auto set_float = [&](float* field) {
    std::optional<float> f = ParseFloat(v);
    if (!f) return false;
    *field = *f;
    return true;
  };
  if (name == "--budget") {
    bool had_unit = false;
    std::optional<uint64_t> bytes = ParseSize(v, &had_unit);
    if (!bytes) return false;
    if (!had_unit && *bytes != 0) {
      *error = "--budget " + v + ": give a unit, e.g. " + v + "G (K, M, G, T are binary: 1G = " +
               "1024 MiB; write " + v + "B if you really mean bytes)";
      return false;
    }
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
    return set_float(&o->temp);
  } else if (name == "--top-p") {
    return set_float(&o->top_p);
  } else if (name == "--min-p") {
    return set_float(&o->min_p);
  } else if (name == "--repeat-penalty") {
    return set_float(&o->repeat_penalty);
  } else if (name == "--presence-penalty") {
    return set_float(&o->presence_penalty);
  } else if (name == "--frequency-penalty") {
    return set_float(&o->frequency_penalty);
  } else if (name == "--repeat-last-n") {
    std::optional<int> n = ParseNonNegInt(v);
    if (!n) return false;
    o->repeat_last_n = *n;
  } else if (name == "--logit-bias") {
    std::pair<int, float> bias;
    if (!ParseLogitBias(v, &bias)) {
      *error = "invalid value for --logit-bias: " + v + " (want ID+BIAS or ID-BIAS, e.g. 15043+1.5)";
      return false;
    }
    o->logit_bias.push_back(bias);
  } else if (name == "--reasoning-budget") {
    std::optional<int> n = ParseNonNegInt(v);
    if (!n) return false;
    o->reasoning_budget = *n;
  } else if (name == "--draft") {
    std::optional<int> n = ParseNonNegInt(v);
    if (!n || *n > kMaxDraftTokens) {
      *error = "--draft " + v + ": a number of tokens from 0 (off) to " +
               std::to_string(kMaxDraftTokens);
      return false;
    }
    o->draft = *n;
  } else if (name == "--top-k") {
    std::optional<int> n = ParseNonNegInt(v);
    if (!n) return false;
    o->top_k = *n;
    o->top_k_given = true;
  } else if (name == "--seed") {
    std::optional<uint64_t> n = ParseU64(v);
    if (!n) return false;
    o->seed = *n;
    o->seed_given = true;
  } else if (name == "--threads") {
    std::optional<int> n = ParseNonNegInt(v);
    if (!n) return false;
    if (*n > 64) {  // the engine's pool holds at most 64 (it would cap silently)
      *error = "--threads " + v + ": at most 64 compute threads";
      return false;
    }
    o->threads = *n;
  } else if (name == "--cpus") {
    o->cpus = v;  // validated by the engine at open
    o->cpus_given = true;
  } else if (name == "--stop") {
    if (v.empty()) {
      *error = "--stop needs a non-empty string";
      return false;
    }
    o->stops.push_back(v);
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
    const std::optional<CachePolicy> policy = CachePolicyFromName(v);
    if (!policy) return false;
    o->cache_policy = *policy;
  } else if (name == "--grammar") {
    o->grammar_file = v;
  } else if (name == "--json-schema") {
    o->json_schema_file = v;
  } else if (name == "--predict") {
    o->predict_file = v;
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
  } else if (name == "--prompt") {
    // llama-bench habit: `bench -p 512` is the prompt length.
    if (o->command == Command::kBench) return ApplyValue("--prompt-tokens", v, o, error);
    if (o->prompt_given) {
      *error = "give -p/--prompt once";
      return false;
    }
    o->prompt = v;
    o->prompt_given = true;
  } else if (name == "--model") {
    o->model_option = v;
    o->model_given = true;
  } else if (name == "--reps") {
    std::optional<int> n = ParseNonNegInt(v);
    if (!n || *n == 0) return false;
    o->reps = *n;
  } else if (name == "--output") {
    if (v != "md" && v != "csv" && v != "json") return false;
    o->output_format = v;
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
      {"--verbose", &Options::verbose, true},
      {"--ignore-eos", &Options::ignore_eos, true},
  };
  for (const Flag& f : kFlags) {
    if (name == f.name) o->*f.field = f.value;
  }
}

// After parsing, in this order: temp, top-p, top-k, ctx, -n, threads, then
// the extra sampler values.
std::string RangeCheck(const Options& o) {
  if (!(o.temp >= 0.0f)) return "--temp must be >= 0";
  if (!(o.top_p > 0.0f && o.top_p <= 1.0f)) return "--top-p must be in (0, 1]";
  if (o.top_k < 0) return "--top-k must be >= 0";
  if (o.ctx == 0) return "--ctx must be > 0";
  if (o.n_tokens == 0) return "-n must be > 0";
  if (o.threads < 0) return "--threads must be >= 0";
  if (!(o.min_p >= 0.0f && o.min_p <= 1.0f)) return "--min-p must be in [0, 1]";
  if (!(o.repeat_penalty > 0.0f)) return "--repeat-penalty must be > 0 (1 = off)";
  if (!o.grammar_file.empty() && !o.json_schema_file.empty()) {
    return "--grammar and --json-schema exclude each other";
  }
  if (!o.predict_file.empty() && o.draft == 0) {
    return "--predict needs --draft N: the prediction is what drafting guesses from";
  }
  return "";
}

ParseOutcome UsageError(std::string message, Options options) {
  ParseOutcome out;
  out.kind = ParseOutcome::Kind::kUsageError;
  out.message = std::move(message);
  out.options = std::move(options);
  return out;
}

ParseOutcome Help(Options options) {
  ParseOutcome out;
  out.kind = ParseOutcome::Kind::kHelp;
  out.options = std::move(options);
  return out;
}

std::vector<std::string> CommandNames() {
  std::vector<std::string> names;
  for (Command c : AllCommands()) names.push_back(CommandName(c));
  // Parsed in their own files (cli/main.cc), but a typo of one is still a typo.
  for (const char* own : {"convert", "verify", "serve"}) names.push_back(own);
  return names;
}

std::string DidYouMean(const std::string& close) {
  return close.empty() ? "" : "; did you mean " + close + "?";
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

}  // namespace

std::vector<std::string> SpellingsOf(const OptionSpec& spec) {
  std::vector<std::string> out = {spec.name};
  if (spec.alias == nullptr) return out;
  std::string_view rest = spec.alias;
  while (!rest.empty()) {
    size_t comma = rest.find(',');
    out.emplace_back(rest.substr(0, comma));
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return out;
}

std::string Closest(std::string_view word, const std::vector<std::string>& candidates) {
  if (word.size() < 3) return "";  // "-x": any guess would be noise
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const std::string& c : candidates) {
    size_t d = EditDistance(word, c);
    // A word that is the start of exactly this candidate counts as close.
    if (word.size() >= 3 && c.rfind(word, 0) == 0) d = std::min<size_t>(d, 1);
    if (d < best_d) {
      best_d = d;
      best = c;
    }
  }
  const size_t limit = std::max<size_t>(2, word.size() / 3);
  return best_d <= limit ? best : "";
}

std::string HelpFor(const OptionSpec& spec, Command command) {
  const std::string help = spec.help;
  const std::string own = "; " + std::string(CommandName(command)) + ": ";
  if (size_t at = help.find(own); at != std::string::npos) {
    const size_t from = at + own.size();
    return help.substr(from, help.find("; ", from) == std::string::npos
                                 ? std::string::npos
                                 : help.find("; ", from) - from);
  }
  // The first text, without the other commands' parts.
  for (Command c : AllCommands()) {
    const std::string other = "; " + std::string(CommandName(c)) + ": ";
    if (size_t at = help.find(other); at != std::string::npos) return help.substr(0, at);
  }
  return help;
}

const std::vector<OptionSpec>& OptionTable() {
  static const std::vector<OptionSpec> table = {
      {"--model", "-m", "DIR", "the container directory (instead of the first word)", kModel},
      {"--prompt", "-p", "TEXT",
       "the prompt (instead of the words after MODEL); bench: prompt length in tokens "
       "(= --prompt-tokens, llama-bench's -p)",
       kReadsPrompt | Bit(Command::kBench)},
      {"--file", "-f", "F", "read the prompt (ids for detokenize) from F; - = stdin", kReadsPrompt},
      {"--budget", nullptr, "SIZE",
       "RAM budget for everything the engine allocates, with a unit: 512M, 1.5G, 4GiB, 1T "
       "(K/M/G/T and KiB/MiB/GiB/TiB are all binary); 0 or absent = the default: "
       "`waste plan`'s recommendation, at most 75% of usable RAM",
       kSizes},
      {"--ctx", "-c,--ctx-size", "N", "context length in tokens (default 4096)", kSizes},
      {"-n", "--n-predict", "N",
       "tokens to generate (default 128); bench: tokens to generate (default 64)", kGenerates},
      {"--temp", "--temperature", "F", "sampling temperature, 0 = greedy (default 0)", kGenerates},
      {"--top-p", nullptr, "F", "nucleus mass in (0, 1] (default 1 = off)", kGenerates},
      {"--top-k", nullptr, "N",
       "keep the N most likely tokens (default 0 = off); eval: rows shown (default 10)",
       kGenerates | Bit(Command::kEval)},
      {"--min-p", nullptr, "F",
       "drop tokens below F times the top token's probability (default 0 = off)", kGenerates},
      {"--repeat-penalty", nullptr, "F",
       "divide the logit of recently seen tokens by F (default 1 = off)", kGenerates},
      {"--repeat-last-n", nullptr, "N", "tokens the penalties look back over (default 64)",
       kGenerates},
      {"--presence-penalty", nullptr, "F",
       "subtract F from the logit of every recently seen token (default 0)", kGenerates},
      {"--frequency-penalty", nullptr, "F",
       "subtract F times its count from a recently seen token's logit (default 0)", kGenerates},
      {"--logit-bias", nullptr, "ID+F",
       "add F to token ID's logit (ID-F subtracts, ID=-inf bans; repeatable)", kGenerates},
      {"--ignore-eos", nullptr, nullptr, "keep generating past the end-of-text token", kGenerates},
      {"--draft", nullptr, "N",
       "guess up to N next tokens from the text so far and check them in one pass (prompt "
       "lookup; faster when the reply repeats its context: edited code, quotations; "
       "default 0 = off)",
       kGenerates},
      {"--seed", "-s", "N",
       "sampling seed for reproducible output (default: random when --temp > 0)", kGenerates},
      {"--threads", "-t", "N",
       "compute threads (at most 64), 0 = WASTE_THREADS or every usable CPU", kOpens},
      {"--cpus", nullptr, "LIST", "bind compute threads to CPUs, e.g. 0-5,8 (Linux, Windows)",
       kOpens},
      {"--stop", nullptr, "STR",
       "stop when the output contains STR (repeatable: any of them; default: the chat "
       "template's end of turn)",
       kRunChat},
      {"--system", nullptr, "STR", "system prompt (used with a chat template)", kRunChat},
      {"--reasoning-budget", nullptr, "N",
       "close a reasoning model's <think> after N tokens and let it answer (chat formats with "
       "think tags: DeepSeek-R1, Kimi-K2-Thinking)",
       kRunChat},
      {"--image", nullptr, "F", "attach an image (repeatable, at most 32; needs a vision tower)",
       kRunChat | Bit(Command::kEval)},
      {"--raw", nullptr, nullptr, "no chat format (chat.json or built in): continue the text as is",
       kRunChat},
      {"--json", nullptr, nullptr,
       "print one JSON object on stdout and nothing else (errors too: {\"error\": ...})", kJson},
      {"--quiet", "-q", nullptr, "only the model's text: no echo, notes or statistics", kGenerates},
      {"--verbose", "-v", nullptr, "also print the seed (on stderr, before the text)", kGenerates},
      {"--learn", nullptr, nullptr, "save the expert hotlist (usage.waste) at the end",
       Bit(Command::kRun)},
      {"--verify", nullptr, nullptr, "check the crc32 of every expert record read", kOpens},
      {"--exclusive-open", nullptr, nullptr,
       "take an advisory lock on the container; fail if another process holds it", kOpens},
      {"--no-direct-io", nullptr, nullptr,
       "read experts through the page cache (default: bypass it)", kOpens},
      {"--usage", nullptr, "PATH", "hotlist file (default MODEL/usage.waste)", kOpens},
      {"--cache", nullptr, "NAME",
       "expert cache replacement policy: reuse-odds (default), lfru or lru; results are the same "
       "with any (WASTE_CACHE_POLICY also takes the experimental lfu-history)",
       kOpens},
      {"--grammar", nullptr, "FILE",
       "constrain the output to a GBNF grammar (docs/SERVER.md, constrained decoding)",
       Bit(Command::kRun)},
      {"--json-schema", nullptr, "FILE", "constrain the output to one JSON value matching a schema",
       Bit(Command::kRun)},
      {"--predict", nullptr, "FILE",
       "the text the reply is expected to be (a file being rewritten): --draft guesses from it "
       "first; the reply is the same without it",
       Bit(Command::kRun)},
      {"--logits-out", nullptr, "FILE", "write the full logits as raw little-endian f32",
       Bit(Command::kEval)},
      {"--ids", nullptr, "\"1 2 3\"", "use these token ids as the prompt (no tokenizer needed)",
       Bit(Command::kRun) | Bit(Command::kEval) | Bit(Command::kBench) | Bit(Command::kDetokenize)},
      {"--prompt-tokens", nullptr, "N", "prompt length in tokens (fixed prompt repeated)",
       Bit(Command::kBench)},
      {"--reps", "-r", "N", "repetitions; rows show the mean and standard deviation (default 1)",
       Bit(Command::kBench)},
      {"--output", "-o", "md|csv|json", "table format (default md; --json = -o json)",
       Bit(Command::kBench)},
      {"--markup", nullptr, nullptr, "recognise special tokens (the default)",
       Bit(Command::kTokenize)},
      {"--plain", nullptr, nullptr, "treat special-token text as ordinary text",
       Bit(Command::kTokenize)},
  };
  return table;
}

const std::vector<Command>& AllCommands() {
  static const std::vector<Command> all = {
      Command::kRun,   Command::kChat,  Command::kEval,       Command::kPerplexity,
      Command::kTokenize, Command::kDetokenize, Command::kBench, Command::kPlan,
      Command::kInfo,  Command::kVersion, Command::kHelp};
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
    case Command::kHelp:
      return "help";
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

std::optional<CachePolicy> CachePolicyFromName(std::string_view name) {
  if (name == "reuse-odds") return CachePolicy::kReuseOdds;
  if (name == "lfru") return CachePolicy::kLfru;
  if (name == "lru") return CachePolicy::kLru;
  return std::nullopt;
}

std::optional<uint64_t> ParseSize(std::string_view s, bool* had_unit) {
  while (!s.empty() && IsBlank(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsBlank(s.back())) s.remove_suffix(1);
  size_t len = DecimalPrefix(s);
  if (len == 0) return std::nullopt;
  double value = std::strtod(std::string(s.substr(0, len)).c_str(), nullptr);
  std::string_view rest = s.substr(len);
  while (!rest.empty() && IsBlank(rest.front())) rest.remove_prefix(1);
  if (had_unit != nullptr) *had_unit = !rest.empty();
  double mult = 1;
  if (!rest.empty()) {
    const char* kPrefixes = "kmgt";
    const char* at = std::strchr(kPrefixes, std::tolower(static_cast<unsigned char>(rest[0])));
    if (at != nullptr && *at != '\0') {
      for (const char* p = kPrefixes; p <= at; ++p) mult *= 1024.0;
      rest.remove_prefix(1);
      // KiB, MiB, ...: the 'i' only with a following B.
      if (rest.size() == 2 && (rest[0] == 'i' || rest[0] == 'I')) rest.remove_prefix(1);
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
  if (word == "-h" || word == "--help") return Help(o);
  if (word == "-v" || word == "--version") {
    o.command = Command::kVersion;
    o.command_name = "version";
    ParseOutcome out;
    out.options = std::move(o);
    return out;
  }
  std::optional<Command> command = CommandFromName(word);
  if (!command) {
    std::string lower = word;
    for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    // `waste RUN`: the edit distance of a case slip is the word's length.
    const std::vector<std::string> names = CommandNames();
    std::string close = std::find(names.begin(), names.end(), lower) != names.end()
                            ? lower
                            : Closest(word, names);
    return UsageError("unknown command '" + word + "'" +
                          (close.empty() ? "" : "; did you mean '" + close + "'?") +
                          " (try --help)",
                      o);
  }
  o.command = *command;
  o.command_name = word;
  if (o.command == Command::kHelp) {
    // `waste help [COMMAND]`
    if (args.size() == 1) return Help(Options{});
    if (args.size() > 2) {
      return UsageError("help takes one command name (waste help COMMAND), not '" + args[2] + "'",
                        Options{});
    }
    std::optional<Command> about = CommandFromName(args[1]);
    if (!about) {
      std::string close = Closest(args[1], CommandNames());
      return UsageError("help: unknown command '" + args[1] + "'" +
                            (close.empty() ? "" : "; did you mean '" + close + "'?"),
                        Options{});
    }
    Options about_o;
    about_o.command = *about;
    return Help(about_o);
  }

  std::vector<std::string> words;  // positionals as given
  bool options_ended = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    // Positionals: after `--`, a lone "-" (stdin), anything not starting
    // with '-', and "-5 degrees" ('-' then a digit or '.').
    if (options_ended || a.size() <= 1 || a[0] != '-' || !LooksLikeOption(a)) {
      words.push_back(a);
      continue;
    }
    if (a == "--") {
      options_ended = true;
      continue;
    }
    if (a == "-h" || a == "--help") return Help(std::move(o));
    std::string name = a;
    std::optional<std::string> inline_value;
    if (a.rfind("--", 0) == 0) {
      size_t eq = a.find('=');
      if (eq != std::string::npos) {
        name = a.substr(0, eq);
        inline_value = a.substr(eq + 1);
      }
    }
    const OptionSpec* spec = FindOption(name);
    if (spec == nullptr && a[1] != '-' && a.size() > 2) {
      // -n8, -c2048: a one-letter option with its value attached.
      const OptionSpec* short_spec = FindOption(a.substr(0, 2));
      if (short_spec != nullptr && short_spec->value_name != nullptr) {
        spec = short_spec;
        name = a.substr(0, 2);
        inline_value = a.substr(2);
      }
    }
    if (spec == nullptr) {
      std::vector<std::string> all;
      for (const OptionSpec& s : OptionTable()) {
        if ((s.used_by & Bit(o.command)) == 0) continue;
        for (const std::string& sp : SpellingsOf(s)) all.push_back(sp);
      }
      return UsageError("unknown option " + name + DidYouMean(Closest(name, all)), o);
    }
    if ((spec->used_by & Bit(o.command)) == 0) {
      return UsageError(o.command_name + " does not use " + name, o);
    }
    if (spec->value_name == nullptr) {
      if (inline_value) return UsageError(name + " takes no value", o);
      ApplyFlag(spec->name, &o);
      continue;
    }
    std::string value;
    if (inline_value) {
      value = *inline_value;
    } else {
      if (i + 1 >= args.size() || LooksLikeOption(args[i + 1]) || args[i + 1] == "--") {
        return UsageError(name + " needs a value", o);
      }
      value = args[++i];
    }
    std::string error;
    if (!ApplyValue(spec->name, value, &o, &error)) {
      if (error.empty()) error = "invalid value for " + name + ": " + value;
      return UsageError(error, o);
    }
  }

  std::string range = RangeCheck(o);
  if (!range.empty()) return UsageError(range, o);
  if (o.command == Command::kBench && !o.n_given) o.n_tokens = 64;
  // The two spellings are one switch (the help says so): -o json is --json,
  // one JSON object on stdout and nothing else.
  if (o.command == Command::kBench && o.json) o.output_format = "json";
  if (o.command == Command::kBench && o.output_format == "json") o.json = true;
  if (o.command == Command::kVersion) {
    if (!words.empty()) return UsageError("unexpected argument \"" + words[0] + "\"", o);
    ParseOutcome out;
    out.options = std::move(o);
    return out;
  }

  // MODEL: -m, else the first word. Then the prompt: -p, else the other
  // words joined by spaces (as ollama does), for the commands that read one.
  if (o.model_given) {
    o.positionals.push_back(o.model_option);
  } else if (!words.empty()) {
    o.positionals.push_back(words.front());
    words.erase(words.begin());
  } else {
    return UsageError("missing MODEL (the container directory)", o);
  }
  if ((Bit(o.command) & kTakesArgument) != 0) {
    if (o.prompt_given && !words.empty()) {
      return UsageError("give the prompt once: -p \"" + o.prompt + "\" and \"" + words[0] +
                            "\" were both given",
                        o);
    }
    if (o.prompt_given) {
      o.positionals.push_back(o.prompt);
    } else if (!words.empty()) {
      std::string joined;
      for (size_t i = 0; i < words.size(); ++i) joined += (i ? " " : "") + words[i];
      o.positionals.push_back(joined);
    }
    if (o.has_argument() && o.file_given) {
      return UsageError("give the prompt once: --file " + o.file + " and \"" + o.argument() +
                            "\" were both given",
                        o);
    }
  } else if (o.command == Command::kPerplexity) {
    // perplexity MODEL FILE: one path, never joined.
    if (words.size() > 1) {
      return UsageError("unexpected argument \"" + words[1] + "\" (perplexity takes MODEL FILE)",
                        o);
    }
    if (!words.empty()) o.positionals.push_back(words.front());
  } else if (!words.empty()) {
    return UsageError("unexpected argument \"" + words[0] + "\" (" + o.command_name +
                          " takes MODEL only)",
                      o);
  }
  if (o.raw && !o.system.empty()) {
    return UsageError("--system needs the chat template, which --raw turns off", o);
  }
  ParseOutcome out;
  out.options = std::move(o);
  return out;
}

}  // namespace waste::cli
