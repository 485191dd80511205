// The CLI's grammar (ENGINE.md §1.2-§1.4) and the text it prints (§1.6,
// §1.7, §7.4), tested without an engine through waste_cli_options.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "help.h"
#include "options.h"
#include "piece_writer.h"
#include "prompt.h"
#include "reasoning_style.h"
#include "report.h"

namespace waste::cli {
namespace {

ParseOutcome Parse(std::vector<std::string> args) { return ParseCommandLine(args); }

std::string ErrorOf(std::vector<std::string> args) {
  ParseOutcome p = Parse(std::move(args));
  EXPECT_EQ(p.kind, ParseOutcome::Kind::kUsageError);
  return p.message;
}

Options Ok(std::vector<std::string> args) {
  ParseOutcome p = Parse(args);
  EXPECT_EQ(p.kind, ParseOutcome::Kind::kOk) << p.message;
  return p.options;
}

// --- §1.1 commands -----------------------------------------------------------

TEST(CliGrammar, NoArgumentsIsUsageErrorWithoutMessage) {
  ParseOutcome p = Parse({});
  EXPECT_EQ(p.kind, ParseOutcome::Kind::kUsageError);
  EXPECT_TRUE(p.message.empty());
}

TEST(CliGrammar, GlobalHelp) {
  for (const char* h : {"-h", "--help"}) {
    ParseOutcome p = Parse({h});
    EXPECT_EQ(p.kind, ParseOutcome::Kind::kHelp);
    EXPECT_EQ(p.options.command, Command::kNone);
  }
}

TEST(CliGrammar, UnknownCommand) {
  EXPECT_EQ(ErrorOf({"frobnicate", "m"}), "unknown command 'frobnicate' (try --help)");
  EXPECT_EQ(ErrorOf({"rnu", "m"}), "unknown command 'rnu'; did you mean 'run'? (try --help)");
  EXPECT_EQ(ErrorOf({"RUN", "m"}), "unknown command 'RUN'; did you mean 'run'? (try --help)");
  EXPECT_EQ(ErrorOf({"--verison"}), "unknown command '--verison' (try --help)");
}

TEST(CliGrammar, EveryCommandIsKnown) {
  for (const char* name :
       {"run", "chat", "eval", "perplexity", "tokenize", "detokenize", "bench", "plan", "info",
        "version", "help"}) {
    std::optional<Command> c = CommandFromName(name);
    ASSERT_TRUE(c.has_value()) << name;
    EXPECT_STREQ(CommandName(*c), name);
  }
  EXPECT_EQ(AllCommands().size(), 11u);
}

// --- §1.2 grammar ------------------------------------------------------------

TEST(CliGrammar, OptionsAndPositionalsInAnyOrder) {
  Options o = Ok({"run", "--temp", "0.5", "model", "-n", "7", "hello", "--raw"});
  EXPECT_EQ(o.command, Command::kRun);
  ASSERT_EQ(o.positionals.size(), 2u);
  EXPECT_EQ(o.model(), "model");
  EXPECT_EQ(o.argument(), "hello");
  EXPECT_FLOAT_EQ(o.temp, 0.5f);
  EXPECT_EQ(o.n_tokens, 7u);
  EXPECT_TRUE(o.raw);
}

TEST(CliGrammar, PromptWordsAreJoined) {
  EXPECT_EQ(Ok({"run", "m", "hello", "world", "-n", "3", "again"}).argument(), "hello world again");
  EXPECT_EQ(ErrorOf({"chat", "m", "b"}), "unexpected argument \"b\" (chat takes MODEL only)");
  EXPECT_EQ(ErrorOf({"version", "x"}), "unexpected argument \"x\"");
}

TEST(CliGrammar, DoubleDashEndsOptions) {
  Options o = Ok({"run", "m", "-n", "2", "--", "-n", "--json"});
  EXPECT_EQ(o.argument(), "-n --json");
  EXPECT_EQ(o.n_tokens, 2u);
  EXPECT_FALSE(o.json);
  EXPECT_EQ(Ok({"run", "m", "--", "-5 degrees"}).argument(), "-5 degrees");
  // '-' then a digit is text even without `--`.
  EXPECT_EQ(Ok({"run", "m", "-5 degrees"}).argument(), "-5 degrees");
}

TEST(CliGrammar, AttachedValues) {
  Options o = Ok({"run", "m", "x", "--budget=1G", "-n8", "-c2048", "--temp=0.5", "-s7", "-t3"});
  EXPECT_EQ(o.budget_bytes, uint64_t{1} << 30);
  EXPECT_EQ(o.n_tokens, 8u);
  EXPECT_EQ(o.ctx, 2048u);
  EXPECT_FLOAT_EQ(o.temp, 0.5f);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_TRUE(o.seed_given);
  EXPECT_EQ(o.threads, 3);
  EXPECT_EQ(ErrorOf({"run", "m", "x", "--json=1"}), "--json takes no value");
  EXPECT_EQ(ErrorOf({"run", "m", "x", "--temp="}), "invalid value for --temp: ");
}

TEST(CliGrammar, LlamaCppAliases) {
  Options o = Ok({"run", "-m", "dir", "-p", "hi there", "--n-predict", "5", "--temperature", "0.7",
                  "--ctx-size", "512", "--threads", "2", "--seed", "9"});
  EXPECT_EQ(o.model(), "dir");
  EXPECT_EQ(o.argument(), "hi there");
  EXPECT_EQ(o.n_tokens, 5u);
  EXPECT_FLOAT_EQ(o.temp, 0.7f);
  EXPECT_EQ(o.ctx, 512u);
  EXPECT_EQ(Ok({"run", "m", "-f", "p.txt"}).file, "p.txt");
  EXPECT_EQ(Ok({"bench", "m", "-p", "128"}).prompt_tokens, 128u);  // llama-bench's -p
  EXPECT_EQ(ErrorOf({"run", "m", "-p", "a", "b"}).rfind("give the prompt once", 0), 0u);
  EXPECT_EQ(ErrorOf({"run", "m", "a", "-f", "p.txt"}).rfind("give the prompt once", 0), 0u);
}

TEST(CliGrammar, VersionAndHelpCommand) {
  for (const char* v : {"-v", "--version", "version"}) {
    ParseOutcome p = Parse({v});
    EXPECT_EQ(p.kind, ParseOutcome::Kind::kOk) << v;
    EXPECT_EQ(p.options.command, Command::kVersion) << v;
  }
  EXPECT_EQ(Parse({"help"}).kind, ParseOutcome::Kind::kHelp);
  EXPECT_EQ(Parse({"help"}).options.command, Command::kNone);
  ParseOutcome h = Parse({"help", "chat"});
  EXPECT_EQ(h.kind, ParseOutcome::Kind::kHelp);
  EXPECT_EQ(h.options.command, Command::kChat);
  EXPECT_EQ(ErrorOf({"help", "chta"}), "help: unknown command 'chta'; did you mean 'chat'?");
  EXPECT_EQ(ErrorOf({"run", "m", "x", "-t", "1000"}), "--threads 1000: at most 64 compute threads");
  EXPECT_EQ(ErrorOf({"run", "m", "x", "--raw", "--system", "be brief"}),
            "--system needs the chat template, which --raw turns off");
  EXPECT_EQ(ErrorOf({"help", "run", "extra"}),
            "help takes one command name (waste help COMMAND), not 'extra'");
}

// An option shared by several commands shows each command its own text.
TEST(CliGrammar, HelpTextIsTheCommandsOwn) {
  const OptionSpec* p = nullptr;
  const OptionSpec* n = nullptr;
  for (const OptionSpec& spec : OptionTable()) {
    if (std::string(spec.name) == "--prompt") p = &spec;
    if (std::string(spec.name) == "-n") n = &spec;
  }
  ASSERT_TRUE(p && n);
  EXPECT_EQ(HelpFor(*p, Command::kRun), "the prompt (instead of the words after MODEL)");
  EXPECT_EQ(HelpFor(*p, Command::kBench),
            "prompt length in tokens (= --prompt-tokens, llama-bench's -p)");
  EXPECT_EQ(HelpFor(*n, Command::kChat), "tokens to generate (default 128)");
  EXPECT_EQ(HelpFor(*n, Command::kBench), "tokens to generate (default 64)");
  for (Command c : {Command::kRun, Command::kChat, Command::kEval, Command::kBench}) {
    for (const OptionSpec& spec : OptionTable()) {
      const std::string h = HelpFor(spec, c);
      EXPECT_EQ(h.find("; bench: "), std::string::npos) << spec.name;
      EXPECT_EQ(h.find("; eval: "), std::string::npos) << spec.name;
    }
  }
}

// docs/CLI.md's "Every option" table names every option of the table.
TEST(CliGrammar, EveryOptionIsInTheReference) {
  std::ifstream f(std::string(WASTE_SOURCE_DIR) + "/docs/CLI.md");
  ASSERT_TRUE(f) << "docs/CLI.md";
  const std::string doc((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  const size_t table = doc.find("## Every option");
  ASSERT_NE(table, std::string::npos);
  for (const OptionSpec& spec : OptionTable()) {
    for (const std::string& s : SpellingsOf(spec)) {
      EXPECT_NE(doc.find("`" + s + "`", table), std::string::npos) << s;
    }
  }
}

TEST(CliGrammar, DidYouMean) {
  EXPECT_EQ(ErrorOf({"run", "m", "--tmep", "1"}), "unknown option --tmep; did you mean --temp?");
  EXPECT_EQ(ErrorOf({"run", "m", "--budgett", "1G"}),
            "unknown option --budgett; did you mean --budget?");
  EXPECT_EQ(ErrorOf({"run", "m", "--zzzzzzzz"}), "unknown option --zzzzzzzz");
  EXPECT_EQ(Closest("/exti", {"/exit", "/help"}), "/exit");
}

TEST(CliGrammar, LoneDashIsPositional) {
  Options o = Ok({"run", "m", "-"});
  EXPECT_EQ(o.argument(), "-");
}

TEST(CliGrammar, UnknownOptions) {
  EXPECT_EQ(ErrorOf({"run", "m", "-x"}), "unknown option -x");  // too short to guess
  EXPECT_EQ(ErrorOf({"info", "m", "--frobnicate"}), "unknown option --frobnicate");
}

TEST(CliGrammar, HelpAfterACommand) {
  for (const char* h : {"-h", "--help"}) {
    ParseOutcome p = Parse({"run", h});
    EXPECT_EQ(p.kind, ParseOutcome::Kind::kHelp);
    EXPECT_EQ(p.options.command, Command::kRun);
  }
  EXPECT_EQ(Parse({"plan", "m", "--budget", "1G", "--help"}).kind, ParseOutcome::Kind::kHelp);
}

TEST(CliGrammar, MissingValue) {
  EXPECT_EQ(ErrorOf({"run", "m", "--temp"}), "--temp needs a value");
  EXPECT_EQ(ErrorOf({"run", "m", "--temp", "--budget", "8G"}), "--temp needs a value");
  EXPECT_EQ(ErrorOf({"run", "m", "-n", "-q"}), "-n needs a value");
  // '-' then a digit or '.' is a value and reaches the checks.
  EXPECT_EQ(ErrorOf({"run", "m", "--temp", "-1"}), "--temp must be >= 0");
  EXPECT_EQ(ErrorOf({"run", "m", "--temp", "-.5"}), "--temp must be >= 0");
  // A lone '-' is a value too (--file - = stdin).
  EXPECT_TRUE(Ok({"run", "m", "--file", "-"}).file_given);
}

TEST(CliGrammar, LastRepeatWinsButStopsAccumulate) {
  Options o = Ok({"run", "m", "--temp", "1", "--temp", "0.25", "--stop", "a", "--stop", "b"});
  EXPECT_FLOAT_EQ(o.temp, 0.25f);
  EXPECT_EQ(o.stops, (std::vector<std::string>{"a", "b"}));
}

TEST(CliGrammar, SamplingOptions) {
  Options o = Ok({"run", "m", "x", "--min-p", "0.05", "--repeat-penalty", "1.1",
                  "--repeat-last-n", "32", "--presence-penalty", "0.5", "--frequency-penalty",
                  "0.25", "--ignore-eos", "--logit-bias", "15+1.5", "--logit-bias", "7-2",
                  "--logit-bias", "9=-inf"});
  EXPECT_FLOAT_EQ(o.min_p, 0.05f);
  EXPECT_FLOAT_EQ(o.repeat_penalty, 1.1f);
  EXPECT_EQ(o.repeat_last_n, 32);
  EXPECT_FLOAT_EQ(o.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(o.frequency_penalty, 0.25f);
  EXPECT_TRUE(o.ignore_eos);
  ASSERT_EQ(o.logit_bias.size(), 3u);
  EXPECT_EQ(o.logit_bias[0], (std::pair<int, float>{15, 1.5f}));
  EXPECT_EQ(o.logit_bias[1], (std::pair<int, float>{7, -2.0f}));
  EXPECT_TRUE(std::isinf(o.logit_bias[2].second));
  EXPECT_EQ(ErrorOf({"run", "m", "x", "--logit-bias", "abc"}).rfind("invalid value for --logit-bias", 0), 0u);
  EXPECT_EQ(ErrorOf({"run", "m", "x", "--min-p", "2"}), "--min-p must be in [0, 1]");
}

TEST(CliGrammar, DraftOption) {
  EXPECT_EQ(Ok({"run", "m", "x"}).draft, 0);
  EXPECT_EQ(Ok({"run", "m", "x", "--draft", "8"}).draft, 8);
  EXPECT_EQ(Ok({"chat", "m", "--draft", "16"}).draft, 16);
  EXPECT_EQ(Ok({"bench", "m", "--draft", "4"}).draft, 4);
  EXPECT_EQ(ErrorOf({"run", "m", "x", "--draft", "17"}),
            "--draft 17: a number of tokens from 0 (off) to 16");
  EXPECT_EQ(ErrorOf({"run", "m", "x", "--draft", "-1"}).find("--draft"), 0u);
  EXPECT_NE(ErrorOf({"eval", "m", "x", "--draft", "4"}), "");  // not an eval option
  // --predict is drafting's input: alone it would do nothing.
  EXPECT_EQ(Ok({"run", "m", "x", "--draft", "4", "--predict", "old.py"}).predict_file, "old.py");
  EXPECT_EQ(ErrorOf({"run", "m", "x", "--predict", "old.py"}),
            "--predict needs --draft N: the prediction is what drafting guesses from");
  EXPECT_EQ(ErrorOf({"chat", "m", "--draft", "4", "--predict", "old.py"}),
            "chat does not use --predict");
}

TEST(CliGrammar, BenchOptions) {
  Options o = Ok({"bench", "m", "--reps", "5", "-o", "csv"});
  EXPECT_EQ(o.reps, 5);
  EXPECT_EQ(o.output_format, "csv");
  EXPECT_EQ(Ok({"bench", "m", "--json"}).output_format, "json");
  EXPECT_EQ(ErrorOf({"bench", "m", "-o", "xml"}), "invalid value for -o: xml");
  EXPECT_EQ(ErrorOf({"bench", "m", "--reps", "0"}), "invalid value for --reps: 0");
}

TEST(CliGrammar, ImagesAccumulateUpTo32) {
  std::vector<std::string> args = {"run", "m"};
  for (int i = 0; i < 32; ++i) {
    args.push_back("--image");
    args.push_back("img" + std::to_string(i));
  }
  EXPECT_EQ(Ok(args).images.size(), 32u);
  args.push_back("--image");
  args.push_back("one-too-many");
  EXPECT_EQ(ErrorOf(args), "at most 32 images");
}

// Each command accepts the options it reads and refuses the others by name.
TEST(CliGrammar, CommandsRefuseOptionsTheyDoNotUse) {
  for (Command c : AllCommands()) {
    if (c == Command::kHelp) continue;
    std::vector<std::string> args = {CommandName(c), "m"};
    for (const OptionSpec& spec : OptionTable()) {
      std::string name = spec.name;
      std::string value = name == "--budget"                          ? "1G"
                          : name == "--cache"                         ? "lru"
                          : name == "--ids"                           ? "1 2 3"
                          : name == "--output"                        ? "csv"
                          : name == "--logit-bias"                    ? "1+1"
                          : name == "--temp" || name == "--top-p" || name == "--min-p" ? "0.5"
                          : name == "--cpus"                          ? "0"
                                                                      : "3";
      std::vector<std::string> one = {CommandName(c), "m", name};
      if (spec.value_name != nullptr) one.push_back(value);
      ParseOutcome p = Parse(one);
      if ((spec.used_by & Bit(c)) != 0) {
        // (--predict needs --draft as well: DraftOption.)
        if (name == "--model" || name == "--prompt" || name == "--file" || name == "--predict") {
          continue;
        }
        EXPECT_EQ(p.kind, ParseOutcome::Kind::kOk) << CommandName(c) << " " << name << ": " << p.message;
      } else {
        EXPECT_EQ(p.message, std::string(CommandName(c)) + " does not use " + name);
      }
    }
  }
  EXPECT_EQ(ErrorOf({"chat", "m", "--file", "x"}), "chat does not use --file");
  EXPECT_EQ(ErrorOf({"chat", "m", "--json"}), "chat does not use --json");
}

TEST(CliGrammar, MissingModel) {
  EXPECT_EQ(ErrorOf({"run"}), "missing MODEL (the container directory)");
  EXPECT_EQ(ErrorOf({"plan", "--json"}), "missing MODEL (the container directory)");
  EXPECT_EQ(Parse({"version"}).kind, ParseOutcome::Kind::kOk);
}

// --- §1.3 values and range checks --------------------------------------------

TEST(CliValues, Budget) {
  EXPECT_EQ(Ok({"plan", "m", "--budget", "1.5g"}).budget_bytes, 1610612736u);
  EXPECT_EQ(Ok({"plan", "m", "--budget", "1.5GB"}).budget_bytes, 1610612736u);
  EXPECT_EQ(Ok({"plan", "m", "--budget", "2 G"}).budget_bytes, 2147483648u);
  EXPECT_EQ(Ok({"plan", "m", "--budget", "512M"}).budget_bytes, 536870912u);
  EXPECT_EQ(Ok({"plan", "m", "--budget", "4096B"}).budget_bytes, 4096u);
  EXPECT_EQ(Ok({"plan", "m", "--budget", "4GiB"}).budget_bytes, uint64_t{4} << 30);
  EXPECT_EQ(Ok({"plan", "m", "--budget", "1T"}).budget_bytes, uint64_t{1} << 40);
  EXPECT_EQ(Ok({"plan", "m", "--budget", "2 TiB"}).budget_bytes, uint64_t{2} << 40);
  EXPECT_EQ(Ok({"plan", "m", "--budget", "512mib"}).budget_bytes, uint64_t{512} << 20);
  // A bare number would be bytes: refused with the reason.
  EXPECT_EQ(ErrorOf({"plan", "m", "--budget", "4"}).rfind("--budget 4: give a unit, e.g. 4G", 0),
            0u);
  EXPECT_EQ(Ok({"plan", "m", "--budget", "0"}).budget_bytes, 0u);
  EXPECT_TRUE(Ok({"plan", "m", "--budget", "8k"}).budget_given);
  EXPECT_EQ(ErrorOf({"plan", "m", "--budget", "lots"}), "invalid value for --budget: lots");
  EXPECT_EQ(ErrorOf({"plan", "m", "--budget", "-1"}), "invalid value for --budget: -1");
}

TEST(CliValues, SizeGrammar) {
  EXPECT_EQ(ParseSize("1k"), 1024u);
  EXPECT_EQ(ParseSize("1K"), 1024u);
  EXPECT_EQ(ParseSize("1 kb"), 1024u);
  EXPECT_EQ(ParseSize(" 3m "), 3u * 1024 * 1024);
  EXPECT_EQ(ParseSize(".5G"), 536870912u);
  EXPECT_EQ(ParseSize("100b"), 100u);
  EXPECT_EQ(ParseSize("1e3"), 1000u);
  EXPECT_EQ(ParseSize("1T"), uint64_t{1} << 40);
  EXPECT_EQ(ParseSize("1 KiB"), 1024u);
  bool unit = true;
  EXPECT_EQ(ParseSize("12", &unit), 12u);
  EXPECT_FALSE(unit);
  for (const char* bad : {"", "G", "1x", "1GG", "1 G B", "1.5.5", "nan", "inf", "0x10", "-1",
                          "1e30G", "99999999999999999999999", "1Ti", "1iB", "1KiBB"}) {
    EXPECT_FALSE(ParseSize(bad).has_value()) << bad;
  }
}

TEST(CliValues, Integers) {
  EXPECT_EQ(Ok({"run", "m", "--ctx", "4294967295"}).ctx, 4294967295u);
  EXPECT_EQ(ErrorOf({"run", "m", "--ctx", "4294967296"}), "invalid value for --ctx: 4294967296");
  EXPECT_EQ(ErrorOf({"run", "m", "--ctx", "+5"}), "invalid value for --ctx: +5");
  EXPECT_EQ(ErrorOf({"run", "m", "--top-k", "-1"}), "invalid value for --top-k: -1");
  EXPECT_EQ(ErrorOf({"run", "m", "--top-k", "1.5"}), "invalid value for --top-k: 1.5");
  EXPECT_EQ(ErrorOf({"run", "m", "--top-k", "2147483648"}),
            "invalid value for --top-k: 2147483648");
  EXPECT_EQ(Ok({"run", "m", "--top-k", "2147483647"}).top_k, 2147483647);
  EXPECT_EQ(Ok({"run", "m", "--seed", "18446744073709551615"}).seed, 18446744073709551615u);
  EXPECT_EQ(ErrorOf({"run", "m", "--seed", "-3"}), "invalid value for --seed: -3");
  EXPECT_EQ(ErrorOf({"run", "m", "--threads", "-1"}), "invalid value for --threads: -1");
  EXPECT_EQ(ErrorOf({"run", "m", "-n", "x"}), "invalid value for -n: x");
}

TEST(CliValues, Floats) {
  EXPECT_EQ(ErrorOf({"run", "m", "--temp", "nan"}), "invalid value for --temp: nan");
  EXPECT_EQ(ErrorOf({"run", "m", "--temp", "inf"}), "invalid value for --temp: inf");
  EXPECT_EQ(ErrorOf({"run", "m", "--temp", "1e40"}), "invalid value for --temp: 1e40");
  EXPECT_EQ(ErrorOf({"run", "m", "--temp", "0.5x"}), "invalid value for --temp: 0.5x");
  EXPECT_FLOAT_EQ(Ok({"run", "m", "--top-p", "1"}).top_p, 1.0f);
  EXPECT_FLOAT_EQ(Ok({"run", "m", "--top-p", ".9"}).top_p, 0.9f);
}

TEST(CliValues, RangeChecksInSpecOrder) {
  EXPECT_EQ(ErrorOf({"run", "m", "--top-p", "0"}), "--top-p must be in (0, 1]");
  EXPECT_EQ(ErrorOf({"run", "m", "--top-p", "1.01"}), "--top-p must be in (0, 1]");
  EXPECT_EQ(ErrorOf({"run", "m", "--ctx", "0"}), "--ctx must be > 0");
  EXPECT_EQ(ErrorOf({"run", "m", "-n", "0"}), "-n must be > 0");
  // temp first, then top-p, then ctx, then -n, whatever the order given.
  EXPECT_EQ(ErrorOf({"run", "m", "-n", "0", "--ctx", "0", "--top-p", "2", "--temp", "-1"}),
            "--temp must be >= 0");
  EXPECT_EQ(ErrorOf({"run", "m", "-n", "0", "--ctx", "0", "--top-p", "2"}),
            "--top-p must be in (0, 1]");
  EXPECT_EQ(ErrorOf({"run", "m", "-n", "0", "--ctx", "0"}), "--ctx must be > 0");
}

TEST(CliValues, BenchDefaultsTo64Tokens) {
  EXPECT_EQ(Ok({"bench", "m"}).n_tokens, 64u);
  EXPECT_EQ(Ok({"bench", "m", "-n", "5"}).n_tokens, 5u);
  EXPECT_EQ(Ok({"run", "m", "x"}).n_tokens, 128u);
}

TEST(CliValues, Extensions) {
  Options o = Ok({"run", "m", "--no-direct-io", "--usage", "u.waste", "--cache", "lru",
                  "--ids", "1, 2\t3", "-q"});
  o.logits_out = Ok({"eval", "m", "--logits-out", "l.f32"}).logits_out;
  o.prompt_tokens = Ok({"bench", "m", "--prompt-tokens", "9"}).prompt_tokens;
  EXPECT_TRUE(o.no_direct_io);
  EXPECT_EQ(o.usage_path, "u.waste");
  EXPECT_EQ(o.cache_policy, CachePolicy::kLru);
  EXPECT_EQ(o.logits_out, "l.f32");
  EXPECT_EQ(o.ids, (std::vector<int>{1, 2, 3}));
  EXPECT_EQ(o.prompt_tokens, 9u);
  EXPECT_TRUE(o.quiet);
  EXPECT_EQ(ErrorOf({"run", "m", "--cache", "fifo"}), "invalid value for --cache: fifo");
  // No --cache leaves the engine's choice (and WASTE_CACHE_POLICY) in charge;
  // each name selects exactly that policy.
  EXPECT_EQ(Ok({"run", "m"}).cache_policy, CachePolicy::kDefault);
  EXPECT_EQ(Ok({"run", "m", "--cache", "lfru"}).cache_policy, CachePolicy::kLfru);
  EXPECT_EQ(Ok({"run", "m", "--cache", "reuse-odds"}).cache_policy, CachePolicy::kReuseOdds);
  EXPECT_EQ(ErrorOf({"run", "m", "--ids", "1 x 3"}), "invalid token id: x");
  EXPECT_TRUE(Ok({"tokenize", "m", "--plain"}).plain);
  EXPECT_FALSE(Ok({"tokenize", "m", "--plain", "--markup"}).plain);
}

TEST(CliValues, IdList) {
  std::string bad;
  EXPECT_EQ(*ParseIdList("1 2,3\t4\n5\r\n", &bad), (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(ParseIdList("  ,, ", &bad)->empty());
  EXPECT_FALSE(ParseIdList("1 -2", &bad).has_value());
  EXPECT_EQ(bad, "-2");
  EXPECT_FALSE(ParseIdList("99999999999", &bad).has_value());
}

// --- §1.4 prompt sources -------------------------------------------------------

class PromptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("waste_prompt_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed())))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }
  std::string path_;
};

TEST_F(PromptTest, FileLosesTrailingNewlinesAndExcludesAPositional) {
  std::ofstream(path_, std::ios::binary) << "from file\r\n\n";
  EXPECT_EQ(ErrorOf({"run", "m", "positional", "--file", path_}).rfind("give the prompt once", 0),
            0u);
  Options o = Ok({"run", "m", "--file", path_});
  PromptText p = ReadPrompt(o, "no prompt");
  ASSERT_TRUE(p.ok) << p.error;
  EXPECT_EQ(p.text, "from file");
}

TEST_F(PromptTest, ArgumentIsVerbatim) {
  Options o = Ok({"run", "m", "keep me\n"});
  PromptText p = ReadPrompt(o, "no prompt");
  ASSERT_TRUE(p.ok);
  EXPECT_EQ(p.text, "keep me\n");
}

TEST_F(PromptTest, UnreadableFile) {
  Options o = Ok({"run", "m", "--file", "/nonexistent/waste/prompt"});
  PromptText p = ReadPrompt(o, "no prompt");
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.error,
            "cannot read prompt file /nonexistent/waste/prompt: No such file or directory");
}

TEST_F(PromptTest, EmptyFileIsTheCommandsMessage) {
  std::ofstream(path_, std::ios::binary) << "\n\n";
  Options o = Ok({"tokenize", "m", "--file", path_});
  PromptText p = ReadPrompt(o, "nothing to read");
  EXPECT_FALSE(p.ok);
  EXPECT_EQ(p.error, "nothing to read");
}

// --- help ------------------------------------------------------------------------

TEST(CliHelp, EveryCommandListsEveryOption) {
  std::string global = GlobalHelp();
  EXPECT_EQ(global.rfind(std::string("waste ") + "0.", 0), 0u) << global;
  for (Command c : AllCommands()) {
    EXPECT_NE(global.find(CommandName(c)), std::string::npos);
    std::string help = CommandHelp(c);
    for (const OptionSpec& spec : OptionTable()) {
      const bool listed = help.find(std::string(spec.name) + " ") != std::string::npos ||
                          help.find(std::string(spec.name) + ",") != std::string::npos;
      EXPECT_EQ(listed, (spec.used_by & Bit(c)) != 0) << CommandName(c) << " " << spec.name;
    }
  }
  EXPECT_NE(UsageHint(Command::kRun).find("waste run MODEL [PROMPT...]"), std::string::npos);
  EXPECT_NE(CommandHelp(Command::kRun).find("-c,--ctx,--ctx-size"), std::string::npos);
  EXPECT_NE(CommandHelp(Command::kRun).find("--budget"), std::string::npos);
  EXPECT_NE(CommandHelp(Command::kRun).find("GiB"), std::string::npos);
}

// --- a reasoning model's thinking shown faint ---------------------------------------
// "[" and "]" stand for the style switches; every way of cutting the reply
// into pieces gives the same output.

std::string Styled(const std::vector<std::string>& pieces, const std::string& open = "<think>",
                   const std::string& close = "</think>") {
  std::string out;
  ReasoningStyle s(
      open, close, [&](std::string_view b) { out.append(b); },
      [&](bool on) { out += on ? "[" : "]"; });
  for (const std::string& p : pieces) s.Push(p);
  s.Finish();
  return out;
}

// Every split of `reply` into three pieces styles it as `want`.
void ExpectEverySplit(const std::string& reply, const std::string& want) {
  for (size_t a = 0; a <= reply.size(); ++a) {
    for (size_t b = a; b <= reply.size(); ++b) {
      EXPECT_EQ(Styled({reply.substr(0, a), reply.substr(a, b - a), reply.substr(b)}), want)
          << "cut at " << a << ", " << b;
    }
  }
}

TEST(CliReasoningStyle, ThinkingFaintTagsHiddenWhereverThePiecesAreCut) {
  ExpectEverySplit("<think>\nhmm, 2+2</think>\n\n4", "[\nhmm, 2+2]\n\n4");
  ExpectEverySplit("\n <think>a</think>b", "\n [a]b");  // whitespace first is kept
  ExpectEverySplit("<think></think>answer", "[]answer");
}

TEST(CliReasoningStyle, AReplyWithoutTheTagOrAFormatWithoutTagsPassesThrough) {
  ExpectEverySplit("The answer is <think>not this</think>.",
                   "The answer is <think>not this</think>.");
  ExpectEverySplit("<thin", "<thin");              // cut short: the held bytes come out
  ExpectEverySplit("<thinking>x", "<thinking>x");  // another word
  EXPECT_EQ(Styled({"<think>a</think>b"}, "", ""), "<think>a</think>b");  // no think tags
  EXPECT_EQ(Styled({"   "}), "   ");
}

TEST(CliReasoningStyle, ACutOffThoughtStillEndsTheStyle) {
  ExpectEverySplit("<think>still thinking </thi", "[still thinking </thi]");
  // A close tag in the answer is text.
  ExpectEverySplit("<think>a</think>b</think>", "[a]b</think>");
}

TEST(CliReasoningStyle, OnlyOnATerminalWithThinkTagsAndWithoutNoColor) {
  ChatTemplate t;
  t.think_open = "<think>";
  t.think_close = "</think>";
  auto run = [](const ChatTemplate* tmpl, bool terminal) {
    std::string out;
    ReasoningStyle s = TerminalReasoningStyle(
        tmpl, terminal, [&](std::string_view b) { out.append(b); },
        [&](std::string_view c) { out.append(c); });
    s.Push("<think>x</think>y");
    s.Finish();
    return out;
  };
  const char* saved = std::getenv("NO_COLOR");
  const std::string keep = saved ? saved : "";
  unsetenv("NO_COLOR");
  EXPECT_EQ(run(&t, true), "\x1b[2mx\x1b[22my");
  EXPECT_EQ(run(&t, false), "<think>x</think>y");
  EXPECT_EQ(run(nullptr, true), "<think>x</think>y");
  setenv("NO_COLOR", "1", 1);
  EXPECT_EQ(run(&t, true), "<think>x</think>y");
  if (saved) {
    setenv("NO_COLOR", keep.c_str(), 1);
  } else {
    unsetenv("NO_COLOR");
  }
}

// --- §7.4 stop strings and UTF-8 hold-back ---------------------------------------
// PieceWriter chains the public StopStringFilter and Utf8Stream
// (waste/text.h, tested on their own in stop_string_test and
// utf8_stream_test); these check the chain the CLI prints through.

std::string Stream(const std::string& stop, const std::vector<std::string>& pieces,
                   bool* stopped = nullptr, std::vector<std::string>* writes = nullptr) {
  std::string out;
  PieceWriter s(stop, [&](std::string_view b) {
    out.append(b);
    if (writes) writes->emplace_back(b);
  });
  for (const std::string& p : pieces) {
    if (!s.Push(p)) break;
  }
  s.Finish();
  if (stopped) *stopped = s.stopped();
  return out;
}

// Bytes at the end of `w` that begin a UTF-8 character not yet complete.
size_t CutTail(std::string_view w) {
  Utf8Stream u;
  u.Push(w);
  return u.pending();
}

TEST(CliStream, SeveralStopStringsFirstWins) {
  std::string out;
  PieceWriter w(std::vector<std::string>{"END", "##"}, [&](std::string_view b) { out.append(b); });
  bool go = true;
  for (const char* p : {"ab", "c#", "#d", "END"}) go = go && w.Push(p);
  w.Finish();
  EXPECT_FALSE(go);
  EXPECT_TRUE(w.stopped());
  EXPECT_EQ(out, "abc");
  out.clear();
  PieceWriter v(std::vector<std::string>{"##", "EN"}, [&](std::string_view b) { out.append(b); });
  for (const char* p : {"xE", "Ny#"}) v.Push(p);
  v.Finish();
  EXPECT_EQ(out, "x");
  out.clear();
  PieceWriter u(std::vector<std::string>{"##", "EN"}, [&](std::string_view b) { out.append(b); });
  for (const char* p : {"xE", "y#"}) u.Push(p);
  u.Finish();
  EXPECT_FALSE(u.stopped());
  EXPECT_EQ(out, "xEy#");
}

TEST(CliStream, StopStringSplitAcrossPieces) {
  bool stopped = false;
  EXPECT_EQ(Stream("<|im_end|>", {"Hello", " world<|im", "_end|>tail", "more"}, &stopped),
            "Hello world");
  EXPECT_TRUE(stopped);
}

TEST(CliStream, NoStopFlushesEverything) {
  bool stopped = true;
  EXPECT_EQ(Stream("STOP", {"a", "b", "STO", "c"}, &stopped), "abSTOc");
  EXPECT_FALSE(stopped);
  EXPECT_EQ(Stream("", {"x", "y"}), "xy");
}

TEST(CliStream, StopNeverPartlyPrinted) {
  std::vector<std::string> writes;
  Stream("END", {"abc", "E", "N", "D"}, nullptr, &writes);
  for (const std::string& w : writes) EXPECT_EQ(w.find('E'), std::string::npos) << w;
}

TEST(CliStream, NoEmptyWrites) {
  std::vector<std::string> writes;
  Stream("END", {"", "E", "x", "\xC3", "\xA9", "EN", "D"}, nullptr, &writes);
  for (const std::string& w : writes) EXPECT_FALSE(w.empty());
}

TEST(CliStream, Utf8CharacterHeldUntilComplete) {
  // "é" = C3 A9, "€" = E2 82 AC, split across pieces.
  std::vector<std::string> writes;
  std::string out = Stream("", {"caf\xC3", "\xA9 ", "\xE2\x82", "\xAC!"}, nullptr, &writes);
  EXPECT_EQ(out, "caf\xC3\xA9 \xE2\x82\xAC!");
  for (const std::string& w : writes) EXPECT_EQ(CutTail(w), 0u) << w;
}

TEST(CliStream, Utf8AndStopTogether) {
  // The stop string follows a split character: the character is written
  // whole, the stop string not at all.
  std::vector<std::string> writes;
  bool stopped = false;
  std::string out =
      Stream("<|end|>", {"\xE2", "\x82", "\xAC<|", "end|>", "after"}, &stopped, &writes);
  EXPECT_TRUE(stopped);
  EXPECT_EQ(out, "\xE2\x82\xAC");
  for (const std::string& w : writes) EXPECT_EQ(CutTail(w), 0u) << w;
  // A character cut off by the end of generation still comes out, raw.
  EXPECT_EQ(Stream("", {"ok\xE2\x82"}), "ok\xE2\x82");
}

// --- §1.6 / §1.7 report shapes ---------------------------------------------------

TEST(CliReport, Sizes) {
  EXPECT_EQ(FormatSize(0), "0 MiB");
  EXPECT_EQ(FormatSize(10702040), "10 MiB");
  EXPECT_EQ(FormatSize(uint64_t{4} << 30), "4.00 GiB");
  EXPECT_EQ(FormatGb(uint64_t{3} << 29), "1.50 GiB");
  EXPECT_EQ(FormatParams(1113764), "1.11 M");
  EXPECT_EQ(FormatParams(48000000000ull), "48.00 B");
  EXPECT_EQ(FormatSize(4096), "4 KiB");
  EXPECT_EQ(FormatParams(2780000000000ull), "2.78 T");
}

TEST(CliReport, StatsLine) {
  EXPECT_EQ(StatsLine(16, 26.87, 9000, 14552),
            "[16 tokens, 26.87 s, 0.60 tok/s | experts 9000 hit / 14552 miss = 38%]");
  EXPECT_EQ(StatsLine(3, 0, 0, 0), "[3 tokens, 0.00 s, 0.00 tok/s | experts 0 hit / 0 miss = 0%]");
  EXPECT_EQ(HitPercent(2965, 363), 89);
  RunTimings t;
  t.load_s = 0.5;
  t.prompt_tokens = 34;
  t.prompt_s = 5.1;
  t.first_token_s = 5.3;
  t.tokens = 8;
  t.gen_s = 1.41;
  t.hit = 9000;
  t.miss = 14552;
  t.bytes_read = uint64_t{5} << 29;
  EXPECT_EQ(StatsLine(t),
            "[load 0.50 s | prompt 34 tokens, 5.10 s, 6.67 tok/s | first token 5.30 s | 8 tokens, "
            "1.41 s, 5.67 tok/s | experts 9000 hit / 14552 miss = 38%, 2.50 GiB read]");
  Json j;
  AddTimings(t, &j);
  for (const char* key : {"load_s", "prompt_s", "prompt_tok_per_s", "first_token_s", "generate_s",
                          "hit_rate", "total_bytes_read"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(ProgressLine(128, 2291, 2.0), "prompt 128/2291 tokens (5%), 64.0 tok/s, ETA 34 s");
  EXPECT_EQ(EscapeControls("a\x1b[2Jb\n\tc\r\x07"), "a\\x1b[2Jb\n\tc\\r\\x07");
}

TEST(CliReport, BudgetNoteAndWarning) {
  MemoryUsage u;
  u.trunk_bytes = uint64_t{20} << 30;
  u.expert_cache_bytes = uint64_t{10} << 30;
  EXPECT_EQ(BudgetNote(u, uint64_t{64} << 30),
            "waste: no --budget: using 30.00 GiB of 64.00 GiB (expert cache 10.00 GiB)");
  EXPECT_EQ(BudgetNote(u, 0), "waste: no --budget: using 30.00 GiB (expert cache 10.00 GiB)");
  u.budget_bytes = uint64_t{31} << 30;
  EXPECT_EQ(BudgetNote(u, 0),
            "waste: no --budget: the default budget 31.00 GiB, using 30.00 GiB (expert cache "
            "10.00 GiB)");
  EXPECT_TRUE(OverCapWarning(uint64_t{48} << 30, uint64_t{64} << 30, "m").empty());
  std::string w = OverCapWarning(uint64_t{50} << 30, uint64_t{64} << 30, "/models/k");
  EXPECT_EQ(w.rfind("waste: the engine holds 50.00 GiB, leaving under 25% of the 64.00 GiB this "
                    "process may use",
                    0),
            0u);
  EXPECT_NE(w.find("waste plan /models/k"), std::string::npos);
  EXPECT_EQ(w.find("MODEL"), std::string::npos);
  EXPECT_TRUE(OverCapWarning(uint64_t{50} << 30, 0, "m").empty());
  EXPECT_TRUE(SmallCacheHint(100, 50, "m").empty());
  EXPECT_NE(SmallCacheHint(50, 100, "m").find("smaller than one token's working set"),
            std::string::npos);
}

MemPlan TinyPlan() {
  MemPlan p;
  p.ctx = 4096;
  p.trunk_bytes = 352872;
  p.state_bytes = 718336;
  p.scratch_bytes = 9581680;
  p.min_expert_cache = 49152;
  p.floor_bytes = 10702040;
  p.recommended_bytes = 10996952;
  p.working_set_bytes = 98304;
  p.physical_ram_bytes = 25276502016;
  p.usable_ram_bytes = 25276502016;
  p.usable_ram_source = "physical";
  return p;
}

TEST(CliReport, PlanTextMatchesTheReferenceLayout) {
  PlanBudget b;
  b.given = true;
  b.budget = uint64_t{4} << 30;
  b.expert_cache = 4284237912;
  std::string text = PlanText("tiny.waste", TinyPlan(), b);
  const char* expected_head =
      "memory plan for tiny.waste (ctx 4096)\n"
      "\n"
      "  resident trunk             345 KiB\n"
      "  KDA state + KV cache       702 KiB\n"
      "  scratch                      9 MiB\n"
      "  minimum expert cache        48 KiB\n"
      "  ---------------------------------\n"
      "  FLOOR                       10 MiB\n"
      "  recommended                 10 MiB   (floor + 3x a token's working set,\n"
      "                                      capped at every expert the\n"
      "                                      container holds; below one\n"
      "                                      working set the cache keeps\n"
      "                                      nothing alive between tokens)\n"
      "\n";
  EXPECT_EQ(text.substr(0, std::string(expected_head).size()), expected_head);
  EXPECT_NE(text.find("  budget 4.00 GiB -> expert cache 3.99 GiB\n"), std::string::npos) << text;
  b.below_floor = true;
  b.budget = 1 << 20;
  EXPECT_NE(PlanText("tiny.waste", TinyPlan(), b)
                .find("  budget 1 MiB is BELOW the floor — open would fail\n"),
            std::string::npos);
}

// A budget beyond every expert the container holds: the cache figure is
// what opening allocates; a budget that leaves the OS under 25% warns.
TEST(CliReport, PlanTextCapsTheCacheAndWarnsOverTheCap) {
  MemPlan p = TinyPlan();
  p.all_experts_bytes = 589824;
  PlanBudget b;
  b.given = true;
  b.budget = uint64_t{2} << 40;
  b.expert_cache = b.budget - p.floor_bytes + p.min_expert_cache;
  std::string text = PlanText("tiny.waste", p, b);
  EXPECT_NE(text.find("expert cache 576 KiB (every expert the container holds; the rest is not "
                      "allocated)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("warning"), std::string::npos) << text;
  p.all_experts_bytes = uint64_t{30} << 30;
  b.budget = uint64_t{22} << 30;
  b.expert_cache = b.budget - p.floor_bytes + p.min_expert_cache;
  text = PlanText("tiny.waste", p, b);
  EXPECT_NE(text.find("warning: that leaves under 25% of the usable 23.54 GiB to the OS"),
            std::string::npos)
      << text;
}

TEST(CliReport, PlanJsonKeysInReferenceOrder) {
  PlanBudget b;
  b.given = true;
  b.budget = uint64_t{4} << 30;
  b.expert_cache = 123;
  std::string j = DumpJson(PlanJson(TinyPlan(), b));
  EXPECT_EQ(j.rfind("{\"ctx\":4096,\"trunk_bytes\":352872,\"state_bytes\":718336,"
                    "\"scratch_bytes\":9581680,\"min_expert_cache\":49152,"
                    "\"floor_bytes\":10702040,\"recommended_bytes\":10996952,"
                    "\"working_set_bytes\":98304,\"physical_ram_bytes\":25276502016,"
                    "\"usable_ram_bytes\":25276502016,\"budget_bytes\":4294967296,"
                    "\"expert_cache_bytes\":123",
                    0),
            0u)
      << j;
  b.below_floor = true;
  EXPECT_NE(DumpJson(PlanJson(TinyPlan(), b)).find("\"expert_cache_bytes\":-1"), std::string::npos);
  b.given = false;
  EXPECT_EQ(DumpJson(PlanJson(TinyPlan(), b)).find("\"budget_bytes\""), std::string::npos);
}

TEST(CliReport, InfoShapes) {
  ModelInfo info;
  info.arch = "kimi-linear";
  info.layers = 4;
  info.experts = 8;
  info.top_k = 2;
  info.hidden = 128;
  info.params_total = 1113764;
  info.params_active = 638628;
  info.quantization = "experts VQ3R, trunk Q4G/Q8G/F32";
  MemoryUsage used;
  used.expert_cache_bytes = 344064;
  std::string text = InfoText("WASTE 0.1.0 (container v0, backend CPU, crc32 zlib, x86_64)", info,
                              used, "CPU", 2, true);
  EXPECT_NE(text.find("\n\n  arch          kimi-linear\n  layers        4\n"
                      "  experts       8 (top-2)\n  hidden        128\n"
                      "  parameters    1.11 M total, 638.6 K active/token\n"
                      "  quantization  experts VQ3R, trunk Q4G/Q8G/F32\n"
                      "  expert cache  336 KiB\n"),
            std::string::npos)
      << text;
  std::string j = DumpJson(InfoJson("0.1.0", info, used, "CPU", 2, true));
  EXPECT_EQ(j.rfind("{\"engine\":\"0.1.0\",\"arch\":\"kimi-linear\",\"layers\":4,\"experts\":8,"
                    "\"top_k\":2,\"hidden\":128,\"params_total\":1113764,"
                    "\"params_active\":638628,\"quantization\":\"experts VQ3R, trunk "
                    "Q4G/Q8G/F32\",\"expert_cache_bytes\":344064",
                    0),
            0u)
      << j;
}

TEST(CliReport, EvalRows) {
  EXPECT_EQ(EvalRow(199, 12.6764f, 0.7086, "\xC7"), "     199   12.6764   0.7086  <byte 0xC7>");
  EXPECT_EQ(EvalRow(43, 11.2884f, 0.1768, "+"), "      43   11.2884   0.1768  +");
  EXPECT_EQ(DisplayPiece("caf\xC3\xA9\n"), "caf\xC3\xA9\\n");
  EXPECT_EQ(DisplayPiece("\xED\xA0\x80"), "<byte 0xED><byte 0xA0><byte 0x80>");  // surrogate
}

TEST(CliReport, JsonSurvivesInvalidUtf8) {
  Json j;
  j["text"] = std::string("ok\xC3");
  EXPECT_NE(DumpJson(j).find("ok"), std::string::npos);
}

}  // namespace
}  // namespace waste::cli
