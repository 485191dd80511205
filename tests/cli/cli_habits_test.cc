// Issue #17: the `waste` binary used with llama.cpp / ollama habits, one
// test per behaviour, on the demo container (greedy unless a test says so,
// so every expectation is deterministic): argument forms, --json errors,
// timings, Ctrl-C / SIGTERM in run, chat's commands and full context,
// sampling options, bench rows, container errors.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "per_test_dir.h"
#include "subprocess.h"

namespace waste::test {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kWaste = WASTE_CLI_BINARY;
const std::string kDemo = WASTE_DEMO_CONTAINER;

ProcessResult Waste(std::vector<std::string> args, std::string_view input = {}) {
  args.insert(args.begin(), kWaste);
  return RunProcess(args, input, 180);
}

// stdout must be exactly one JSON object on one line.
json OneObject(const ProcessResult& r) {
  EXPECT_TRUE(!r.out.empty() && r.out.back() == '\n' &&
              std::count(r.out.begin(), r.out.end(), '\n') == 1)
      << Describe(r);
  json j = json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object()) << Describe(r);
  return j;
}

class CliHabits : public PerTestDir {
 protected:
  CliHabits() : PerTestDir("waste_cli_habits") {}
  void SetUp() override {
    ASSERT_TRUE(fs::exists(kDemo + "/manifest.json")) << kDemo;
    PerTestDir::SetUp();
  }
};

TEST_F(CliHabits, AliasesAttachedValuesAndJoinedWordsMeanTheSame) {
  const ProcessResult a = Waste({"run", kDemo, "hello world", "-n", "6", "--json"});
  const ProcessResult b =
      Waste({"run", "-m", kDemo, "--n-predict=6", "--json", "-c4096", "hello", "world"});
  const ProcessResult c = Waste({"run", "--model=" + kDemo, "-p", "hello world", "-n6", "--json",
                                 "--temperature", "0"});
  ASSERT_EQ(a.exit_code, 0) << Describe(a);
  const json ja = OneObject(a), jb = OneObject(b), jc = OneObject(c);
  EXPECT_EQ(ja["ids"], jb["ids"]);
  EXPECT_EQ(ja["ids"], jc["ids"]);
  EXPECT_EQ(ja["prompt_tokens"], jb["prompt_tokens"]);
}

TEST_F(CliHabits, DoubleDashMakesAPromptOfWordsStartingWithDash) {
  const ProcessResult r = Waste({"tokenize", kDemo, "--json", "--", "-5 degrees"});
  const ProcessResult plain = Waste({"tokenize", kDemo, "--json", "-5 degrees"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_EQ(OneObject(r)["ids"], OneObject(plain)["ids"]);
  EXPECT_GT(OneObject(r)["n"].get<int>(), 0);
}

TEST_F(CliHabits, DidYouMeanVersionAndHelp) {
  const ProcessResult typo = Waste({"run", kDemo, "x", "--tmep", "1"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_TRUE(Contains(typo.err, "unknown option --tmep; did you mean --temp?")) << Describe(typo);
  const ProcessResult cmd = Waste({"chta", kDemo});
  EXPECT_EQ(cmd.exit_code, 2);
  EXPECT_TRUE(Contains(cmd.err, "did you mean 'chat'?")) << Describe(cmd);
  for (const char* v : {"--version", "-v"}) {
    const ProcessResult r = Waste({v});
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.out.rfind("WASTE ", 0), 0u) << Describe(r);
  }
  const ProcessResult help = Waste({"help", "bench"});
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_TRUE(Contains(help.out, "--reps")) << Describe(help);
  EXPECT_FALSE(Contains(help.out, "--system")) << Describe(help);  // bench does not use it
}

// convert, verify and serve parse their own options (cli/main.cc); the
// global help, `waste help NAME` and the typo hint must still know them.
TEST_F(CliHabits, EveryCommandIsInTheHelpAndHasItsOwn) {
  const ProcessResult all = Waste({"--help"});
  ASSERT_EQ(all.exit_code, 0) << Describe(all);
  for (const char* name : {"run", "chat", "eval", "perplexity", "tokenize", "detokenize", "bench",
                           "plan", "info", "version", "help", "serve", "convert", "verify"}) {
    EXPECT_TRUE(Contains(all.out, std::string("\n  ") + name + " ")) << name << "\n" << all.out;
  }
  const struct {
    const char* name;
    const char* option;
  } own[] = {{"convert", "--expert-format"}, {"verify", "--source"}, {"serve", "--port"}};
  for (const auto& c : own) {
    const ProcessResult h = Waste({"help", c.name});
    EXPECT_EQ(h.exit_code, 0) << Describe(h);
    EXPECT_TRUE(Contains(h.out, c.option)) << c.name << ": " << Describe(h);
  }
  const ProcessResult typo = Waste({"conver", "a", "b"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_TRUE(Contains(typo.err, "did you mean 'convert'?")) << Describe(typo);
}

// perplexity: a text that fits is one pass; a longer one is scored in
// half-overlapping windows, every token once; the figures are close (the
// windows give each token at least half a window of context).
TEST_F(CliHabits, PerplexityScoresEveryTokenOnceInWindowsOrOnePass) {
  const std::string text = dir_ / "text.txt";
  {
    std::ofstream f(text);
    for (int i = 0; i < 40; ++i) f << "And it came to pass in those days that the people went up. ";
  }
  const ProcessResult one = Waste({"perplexity", kDemo, text, "-c", "4096", "--json"});
  ASSERT_EQ(one.exit_code, 0) << Describe(one);
  const json a = OneObject(one);
  const ProcessResult win = Waste({"perplexity", kDemo, text, "-c", "64", "--json"});
  ASSERT_EQ(win.exit_code, 0) << Describe(win);
  const json b = OneObject(win);
  EXPECT_EQ(a["windows"], 1);
  EXPECT_EQ(a["scored"].get<int>(), a["tokens"].get<int>() - 1);
  EXPECT_EQ(b["scored"], a["scored"]);
  EXPECT_EQ(b["window_tokens"], 64);
  // ceil((tokens - 64) / 32) + 1 windows of 64, starting every 32 tokens
  const int tokens = b["tokens"].get<int>();
  EXPECT_EQ(b["windows"].get<int>(), (tokens - 64 + 31) / 32 + 1);
  EXPECT_GT(b["perplexity"].get<double>(), 1.0);
  EXPECT_TRUE(b["complete"].get<bool>());
  const ProcessResult missing = Waste({"perplexity", kDemo, dir_ / "nope.txt", "--json"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_TRUE(Contains(OneObject(missing)["error"]["message"].get<std::string>(), "nope.txt"))
      << Describe(missing);
}

TEST_F(CliHabits, BenchRefusesRowsThatWouldNotFitTheContext) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"bench", kDemo, "-p", "100000", "-n", "2"},
        std::vector<std::string>{"bench", kDemo, "-p", "8", "-n", "5000", "-c", "64"}}) {
    const ProcessResult r = Waste(args);
    EXPECT_EQ(r.exit_code, 2) << Describe(r);
    EXPECT_TRUE(Contains(r.err, "raise --ctx")) << Describe(r);
    EXPECT_TRUE(r.out.empty()) << Describe(r);  // no table header before the refusal
  }
}

// A state saved with a longer context than the session has: the message
// says so (it used to quote byte counts), and a failed save names the file
// asked for, not the temporary one.
TEST_F(CliHabits, ChatSaveAndLoadFailuresSayWhy) {
  const std::string state = dir_ / "long.state";
  const ProcessResult save =
      Waste({"chat", kDemo, "--raw", "-q", "-n", "4"},
            "one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
            "fifteen sixteen seventeen eighteen nineteen twenty\n/save " + state +
                "\n/save " + (dir_ / "no" / "such" / "dir").string() + "\n");
  ASSERT_EQ(save.exit_code, 0) << Describe(save);
  EXPECT_TRUE(Contains(save.out, "(saved to " + state + ")")) << Describe(save);
  EXPECT_TRUE(Contains(save.out, "(save failed: cannot create " + (dir_ / "no" / "such" / "dir").string() + ": "))
      << Describe(save);
  const ProcessResult load = Waste({"chat", kDemo, "-q", "-c", "16"}, "/load " + state + "\n");
  EXPECT_TRUE(Contains(load.out, "does not fit a context of 16 (it was saved with a longer context"))
      << Describe(load);
}

// A /load'ed state holds no text to re-read: a full context drops it and
// says so (it used to say "dropped the 0 oldest turns").
TEST_F(CliHabits, AFullContextDropsALoadedConversationAndSaysSo) {
  const std::string state = dir_ / "loaded.state";
  std::string words;
  for (int i = 0; i < 4; ++i) words += "and the people went up to the city ";
  const ProcessResult save =
      Waste({"chat", kDemo, "--raw", "-q", "-n", "4"}, words + "\n/save " + state + "\n");
  ASSERT_EQ(save.exit_code, 0) << Describe(save);
  const ProcessResult r = Waste({"chat", kDemo, "--raw", "-n", "30", "-c", "160"},
                                "/load " + state + "\nand Ruth said unto Naomi, whither thou "
                                "goest I will go, and where thou lodgest I will lodge\n/stats\n");
  EXPECT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "was full: dropped the conversation loaded from " + state +
                                  " and re-read the rest"))
      << Describe(r);
}

// The end-of-text token ends the text; its spelling is not printed (a raw
// run used to end with "<|im_end|>").
TEST_F(CliHabits, TheEndTokenIsNotPartOfTheText) {
  const ProcessResult info = Waste({"info", kDemo, "--json"});
  ASSERT_EQ(info.exit_code, 0) << Describe(info);
  const int end = OneObject(info)["eos_id"].get<int>();
  const ProcessResult r =
      Waste({"run", kDemo, "--raw", "x", "-n", "3", "--logit-bias", std::to_string(end) + "+100", "--json"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  const json j = OneObject(r);
  EXPECT_EQ(j["finish"], "eos") << Describe(r);
  EXPECT_EQ(j["text"], "") << Describe(r);
}

// MODEL comes first: words where the container belongs name the missing
// directory, not a missing prompt.
TEST_F(CliHabits, TheModelIsCheckedBeforeThePrompt) {
  const ProcessResult r = Waste({"run", "hello there", "-n", "4"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "no such directory: hello there")) << Describe(r);
}

// A container without a tokenizer: the message names the files looked for
// and what to do, chat refuses at start instead of failing every message,
// and tokenize (which reads only the tokenizer) refuses engine options.
TEST_F(CliHabits, AContainerWithoutATokenizerSaysWhatToDo) {
  const fs::path bare = dir_ / "bare";
  fs::copy(kDemo, bare, fs::copy_options::recursive);
  for (const char* f : {"tokenizer.model", "tiktoken.model"}) fs::remove(bare / f);
  const ProcessResult t = Waste({"tokenize", bare.string(), "hi"});
  EXPECT_EQ(t.exit_code, 1) << Describe(t);
  EXPECT_TRUE(Contains(t.err, "has no tokenizer (no tokenizer.model or tiktoken.model): waste "
                              "tokenize needs text"))
      << Describe(t);
  const ProcessResult r = Waste({"run", bare.string(), "hi", "-n", "2"});
  EXPECT_TRUE(Contains(r.err, "give token ids with --ids")) << Describe(r);
  const ProcessResult c = Waste({"chat", bare.string()}, "hi\n");
  EXPECT_EQ(c.exit_code, 1) << Describe(c);
  EXPECT_TRUE(Contains(c.err, "chat: " + bare.string() + " has no tokenizer")) << Describe(c);
  const ProcessResult opt = Waste({"tokenize", kDemo, "hi", "-t", "2"});
  EXPECT_EQ(opt.exit_code, 2) << Describe(opt);
  EXPECT_TRUE(Contains(opt.err, "tokenize does not use -t")) << Describe(opt);
}

// -q: the model's text only, nothing on stderr, also when the context
// fills; eval's JSON rows carry the piece.
TEST_F(CliHabits, QuietIsQuietAndEvalRowsCarryThePiece) {
  const ProcessResult q = Waste({"run", kDemo, "--raw", "x", "-n", "100", "-c", "8", "-q"});
  EXPECT_EQ(q.exit_code, 0) << Describe(q);
  EXPECT_TRUE(q.err.empty()) << Describe(q);
  const ProcessResult e = Waste({"eval", kDemo, "x", "--top-k", "2", "--json"});
  ASSERT_EQ(e.exit_code, 0) << Describe(e);
  const json j = OneObject(e);
  ASSERT_EQ(j["top"].size(), 2u);
  EXPECT_TRUE(j["top"][0]["piece"].is_string()) << Describe(e);
}

TEST_F(CliHabits, ALogitBiasOnAnIdTheModelLacksIsRefused) {
  const ProcessResult r = Waste({"run", kDemo, "x", "-n", "2", "--logit-bias", "99999+1"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "logit_bias: token id 99999 is outside the vocabulary")) << Describe(r);
}

TEST_F(CliHabits, OptionsACommandDoesNotUseAreRefused) {
  const ProcessResult r = Waste({"chat", kDemo, "--file", "x.txt"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_TRUE(Contains(r.err, "chat does not use --file")) << Describe(r);
  const ProcessResult e = Waste({"eval", kDemo, "x", "--system", "s"});
  EXPECT_EQ(e.exit_code, 2);
  EXPECT_TRUE(Contains(e.err, "eval does not use --system")) << Describe(e);
}

TEST_F(CliHabits, BudgetUnitsAndBareNumbers) {
  const ProcessResult bare = Waste({"plan", kDemo, "--budget", "4"});
  EXPECT_EQ(bare.exit_code, 2);
  EXPECT_TRUE(Contains(bare.err, "--budget 4: give a unit")) << Describe(bare);
  const json gib = OneObject(Waste({"plan", kDemo, "--budget=1GiB", "--json"}));
  EXPECT_EQ(gib["budget_bytes"].get<uint64_t>(), uint64_t{1} << 30);
  const json t = OneObject(Waste({"plan", kDemo, "--budget", "1T", "--json"}));
  EXPECT_EQ(t["budget_bytes"].get<uint64_t>(), uint64_t{1} << 40);
  const ProcessResult text = Waste({"plan", kDemo, "--budget", "1G"});
  EXPECT_TRUE(Contains(text.out, "budget 1.00 GiB")) << Describe(text);
}

TEST_F(CliHabits, ErrorsUnderJsonAreOneObjectOnStdout) {
  const ProcessResult usage = Waste({"run", kDemo, "x", "--json", "--temp", "-1"});
  EXPECT_EQ(usage.exit_code, 2);
  EXPECT_EQ(OneObject(usage)["error"]["message"], "--temp must be >= 0");
  const ProcessResult missing = Waste({"info", (dir_ / "nothing").string(), "--json"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_TRUE(Contains(OneObject(missing)["error"]["message"].get<std::string>(), "no such directory"));
  const ProcessResult notc = Waste({"plan", dir_.string(), "--json"});
  EXPECT_EQ(notc.exit_code, 1);
  EXPECT_EQ(OneObject(notc)["error"]["message"],
            "not a waste container: " + dir_.string() + " (no manifest.json)");
  // `code` is a stable identifier (docs/CLI.md), not the message's words.
  EXPECT_EQ(OneObject(usage)["error"]["code"], "usage");
  EXPECT_EQ(OneObject(missing)["error"]["code"], "not_a_container");
  EXPECT_EQ(OneObject(notc)["error"]["code"], "not_a_container");
  const ProcessResult tight = Waste({"run", kDemo, "x", "--json", "--budget", "1M"});
  EXPECT_EQ(tight.exit_code, 1) << Describe(tight);
  EXPECT_EQ(OneObject(tight)["error"]["code"], "ram_budget") << Describe(tight);
}

TEST_F(CliHabits, TokenizeEmptyTextAndNoTokenizer) {
  const ProcessResult empty = Waste({"tokenize", kDemo, "", "--json"});
  ASSERT_EQ(empty.exit_code, 0) << Describe(empty);
  EXPECT_EQ(OneObject(empty)["ids"], json::array());
  // An empty stdin (or file) is an empty text too, and detokenizes back.
  const ProcessResult piped = Waste({"tokenize", kDemo, "--json"}, "");
  ASSERT_EQ(piped.exit_code, 0) << Describe(piped);
  EXPECT_EQ(OneObject(piped)["ids"], json::array());
  const ProcessResult back = Waste({"detokenize", kDemo, "--json"}, "");
  ASSERT_EQ(back.exit_code, 0) << Describe(back);
  EXPECT_EQ(OneObject(back)["text"], "");
  // A container without its tokenizer: the message says to use --ids.
  const fs::path bare = dir_ / "bare";
  fs::create_directories(bare);
  for (const auto& e : fs::directory_iterator(kDemo)) {
    const std::string f = e.path().filename().string();
    if (f == "tokenizer.model" || f == "specials.json" || f == "chat.json" || f == "usage.waste")
      continue;
    fs::copy_file(e.path(), bare / f);
  }
  const ProcessResult r = Waste({"tokenize", bare.string(), "hello"});
  EXPECT_EQ(r.exit_code, 1) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "--ids")) << Describe(r);
}

TEST_F(CliHabits, QuietKeepsTheModelsTextOnly) {
  const ProcessResult loud = Waste({"run", kDemo, "--raw", "abc", "-n", "8"});
  const ProcessResult quiet = Waste({"run", kDemo, "--raw", "abc", "-n", "8", "-q"});
  ASSERT_EQ(quiet.exit_code, 0) << Describe(quiet);
  EXPECT_EQ(quiet.err, "");
  // Without -q the raw prompt is echoed first; -q leaves only the model's text.
  ASSERT_EQ(loud.out.rfind("abc", 0), 0u) << Describe(loud);
  EXPECT_EQ(quiet.out, loud.out.substr(3));
  EXPECT_GT(quiet.out.size(), 1u);
}

TEST_F(CliHabits, EveryRunReportsItsTimings) {
  const ProcessResult r = Waste({"run", kDemo, "hello", "-n", "5"});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  for (const char* part : {"[load ", " s | prompt ", " tok/s | first token ", " tokens, ",
                           " | experts ", " hit / ", " read]"}) {
    EXPECT_TRUE(Contains(r.err, part)) << part << "\n" << Describe(r);
  }
  const json j = OneObject(Waste({"run", kDemo, "hello", "-n", "5", "--json"}));
  for (const char* key : {"prompt_tokens", "ids", "text", "finish", "tokens", "seconds", "tok_per_s",
                          "experts_hit", "experts_missed", "bytes_read", "seed", "load_s",
                          "prompt_s", "prompt_tok_per_s", "first_token_s", "generate_s",
                          "hit_rate", "total_bytes_read"}) {
    EXPECT_TRUE(j.contains(key)) << key << "\n" << j.dump();
  }
}

TEST_F(CliHabits, RandomSeedByDefaultAndSeedReproduces) {
  std::vector<std::string> base = {"run", kDemo, "--raw", "once upon", "-n", "12", "--json",
                                   "--temp", "1.5"};
  const json a = OneObject(Waste(base));
  const json b = OneObject(Waste(base));
  EXPECT_NE(a["seed"], b["seed"]);
  std::vector<std::string> seeded = base;
  seeded.insert(seeded.end(), {"--seed", a["seed"].dump()});
  EXPECT_EQ(OneObject(Waste(seeded))["ids"], a["ids"]);
  const ProcessResult v = Waste({"run", kDemo, "x", "-n", "2", "--temp", "1", "-s", "42", "-v"});
  EXPECT_TRUE(Contains(v.err, "waste: seed 42")) << Describe(v);
}

TEST_F(CliHabits, SamplingOptionsChangeTheOutputGreedyStaysPut) {
  std::vector<std::string> base = {"run", kDemo, "--raw", "the the the", "-n", "12", "--json"};
  const json greedy = OneObject(Waste(base));
  // Banning the token greedy picks first changes the first token.
  const int first = greedy["ids"][0].get<int>();
  std::vector<std::string> ban = base;
  ban.insert(ban.end(), {"--logit-bias", std::to_string(first) + "=-inf"});
  const json banned = OneObject(Waste(ban));
  EXPECT_NE(banned["ids"][0].get<int>(), first);
  // Greedy repeats itself within 60 tokens; a huge presence penalty over a
  // 64-token window forbids any repeat.
  auto distinct = [](const json& ids) {
    std::vector<int> v = ids.get<std::vector<int>>();
    std::sort(v.begin(), v.end());
    return static_cast<size_t>(std::unique(v.begin(), v.end()) - v.begin());
  };
  std::vector<std::string> long_run = {"run", kDemo, "--raw", "the the the", "-n", "60",
                                       "--ignore-eos", "--json"};
  const json plain60 = OneObject(Waste(long_run));
  ASSERT_LT(distinct(plain60["ids"]), 60u) << "greedy no longer repeats on the demo container";
  long_run.insert(long_run.end(), {"--presence-penalty", "1000", "--repeat-last-n", "64"});
  EXPECT_EQ(distinct(OneObject(Waste(long_run))["ids"]), 60u);
  // Neutral values leave greedy bit-identical.
  std::vector<std::string> neutral = base;
  neutral.insert(neutral.end(), {"--repeat-penalty", "1", "--min-p", "0", "--top-k", "0"});
  EXPECT_EQ(OneObject(Waste(neutral))["ids"], greedy["ids"]);
  // Several --stop strings all apply.
  const std::string text = greedy["text"].get<std::string>();
  ASSERT_GE(text.size(), 4u);
  const json stopped = OneObject(Waste({"run", kDemo, "--raw", "the the the", "-n", "12", "--json",
                                        "--stop", "\x01never\x01", "--stop", text.substr(2, 2)}));
  EXPECT_EQ(stopped["finish"], "stop");
  EXPECT_EQ(stopped["text"], text.substr(0, 2));
}

// A prompt long enough that its prefill is still running when the signal
// lands; the run must stop within a span, print the statistics (or one
// JSON object with "finish": "cancelled") and exit 128 + the signal.
void CheckSignalStopsRun(int sig, int code, bool json_out, const fs::path& dir) {
  std::string prompt;
  for (int i = 0; i < 400; ++i) prompt += "the quick brown fox jumps over the lazy dog. ";
  const std::string file = (dir / "long.txt").string();
  std::ofstream(file) << prompt;
  std::vector<std::string> args = {kWaste, "run", kDemo, "--raw", "-f", file, "--ctx", "32768",
                                   "-n", "100000", "--ignore-eos"};
  if (json_out) args.push_back("--json");
  std::unique_ptr<Subprocess> p = Subprocess::Spawn(args);
  ASSERT_NE(p, nullptr);
  p->CloseStdin();
  // The budget note comes once the model is open (the handlers are in
  // place by then); the prompt alone then takes seconds.
  Subprocess* proc = p.get();
  ASSERT_TRUE(proc->ReadUntil(
      [proc](const std::string&) { return Contains(proc->result().err, "waste: no --budget"); }, 120))
      << Describe(p->result());
  ::usleep(100 * 1000);
  p->Signal(sig);
  ASSERT_TRUE(p->Wait(60)) << Describe(p->result());
  const ProcessResult& r = p->result();
  EXPECT_EQ(r.exit_code, code) << Describe(r);
  if (json_out) {
    EXPECT_EQ(OneObject(r)["finish"], "cancelled");
  } else {
    EXPECT_TRUE(Contains(r.err, "waste: cancelled")) << Describe(r);
    EXPECT_TRUE(Contains(r.err, "[load ")) << Describe(r);
  }
}

TEST_F(CliHabits, CtrlCStopsRunWithStatistics) { CheckSignalStopsRun(SIGINT, 130, false, dir_); }
TEST_F(CliHabits, CtrlCStopsRunWithOneJsonObject) { CheckSignalStopsRun(SIGINT, 130, true, dir_); }
TEST_F(CliHabits, SigtermStopsRunToo) { CheckSignalStopsRun(SIGTERM, 143, false, dir_); }

std::vector<std::string> Lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

TEST_F(CliHabits, ChatCommandsExitHelpUnknownAndMultiLine) {
  const ProcessResult r = Waste({"chat", kDemo, "-n", "4"},
                                "/frobnicate\n/stast\n//not a command\nfirst \\\nsecond\n"
                                "\"\"\"\npasted\nblock\n\"\"\"\n/bye\nnever read\n");
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "(unknown command /frobnicate")) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "(unknown command /stast; did you mean /stats?")) << Describe(r);
  // Continuation prompts for the '\' line and the """ block.
  EXPECT_TRUE(Contains(r.out, "> ... ")) << Describe(r);
  // Three replies (the // line, the joined line, the block), each with a stats line.
  size_t stats = 0;
  for (const std::string& l : Lines(r.err)) stats += l.rfind("[prompt ", 0) == 0 ? 1 : 0;
  EXPECT_EQ(stats, 3u) << Describe(r);
  for (const char* leave : {"/exit", "/quit"}) {
    const ProcessResult q = Waste({"chat", kDemo}, std::string(leave) + "\nhello\n");
    EXPECT_EQ(q.exit_code, 0);
    EXPECT_EQ(q.err.find("[prompt "), std::string::npos) << leave << Describe(q);
  }
  // /timings turns the per-reply line off.
  const ProcessResult t = Waste({"chat", kDemo, "-n", "3"}, "/timings\nhello\n");
  EXPECT_EQ(t.err.find("[prompt "), std::string::npos) << Describe(t);
}

TEST_F(CliHabits, ChatDropsTheOldestTurnsWhenTheContextIsFull) {
  std::string input;
  for (int i = 0; i < 8; ++i) input += "tell me more about the number " + std::to_string(i) + "\n";
  input += "/stats\n";
  const ProcessResult r = Waste({"chat", kDemo, "--ctx", "96", "-n", "8"}, input);
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "waste: the context (--ctx 96) was full: dropped the ")) << Describe(r);
  EXPECT_TRUE(Contains(r.out, "oldest dropped")) << Describe(r);
  // Every line got a reply: no failure message.
  EXPECT_FALSE(Contains(r.err, "invalid argument")) << Describe(r);
}

TEST_F(CliHabits, BenchRowsRepsAndFormats) {
  const ProcessResult md = Waste({"bench", kDemo, "-n", "4", "--reps", "2"});
  ASSERT_EQ(md.exit_code, 0) << Describe(md);
  EXPECT_TRUE(Contains(md.out, "| model | budget | threads | test | t/s | median (range) |"))
      << Describe(md);
  EXPECT_TRUE(Contains(md.out, "| pp ")) << Describe(md);
  EXPECT_TRUE(Contains(md.out, "| tg 4 | ")) << Describe(md);
  EXPECT_TRUE(Contains(md.out, " ± ")) << Describe(md);
  EXPECT_TRUE(Contains(md.out, "..")) << Describe(md);
  const ProcessResult csv = Waste({"bench", kDemo, "-n", "4", "-o", "csv", "-p", "16"});
  ASSERT_EQ(csv.exit_code, 0) << Describe(csv);
  const std::vector<std::string> rows = Lines(csv.out);
  ASSERT_EQ(rows.size(), 3u) << Describe(csv);
  EXPECT_EQ(rows[0], "model,budget,threads,reps,test,tok_per_s,stddev,median,min,max");
  EXPECT_TRUE(Contains(rows[1], ",pp 16,")) << rows[1];
  const json j = OneObject(Waste({"bench", kDemo, "-n", "4", "--reps", "3", "--json"}));
  EXPECT_EQ(j["reps"], 3);
  ASSERT_EQ(j["rows"].size(), 2u);
  EXPECT_EQ(j["rows"][1]["samples"].size(), 3u);
  // The median and range are those of the samples.
  for (const json& row : j["rows"]) {
    std::vector<double> s = row["samples"].get<std::vector<double>>();
    std::sort(s.begin(), s.end());
    EXPECT_NEAR(row["median"].get<double>(), s[1], 1e-3 * s[1] + 1e-4);
    EXPECT_NEAR(row["min"].get<double>(), s[0], 1e-3 * s[0] + 1e-4);
    EXPECT_NEAR(row["max"].get<double>(), s[2], 1e-3 * s[2] + 1e-4);
  }
  for (const char* key : {"tokens", "tok_per_s", "prefill_tok_s", "decode_tok_s", "hit_rate"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  // -o json is --json: the same one object on stdout, nothing before it.
  const json o = OneObject(Waste({"bench", kDemo, "-n", "4", "-o", "json"}));
  EXPECT_EQ(o["reps"], 1);
  EXPECT_EQ(o["rows"].size(), 2u);
  // The machine's load (Linux and macOS keep one): a figure's context.
  ASSERT_TRUE(j.contains("load_average_before"));
  EXPECT_GE(j["load_average_before"].get<double>(), 0.0);
  EXPECT_GE(j["load_average_after"].get<double>(), 0.0);
  EXPECT_TRUE(Contains(md.out, "  host      load average ")) << Describe(md);
}

// -n 1: the one token comes from the prompt's logits, so no generation step
// runs; a tg row would be one token over microseconds (it once read
// 432152 tok/s). The pp row stays, the tg row and decode_tok_s go.
TEST_F(CliHabits, BenchWithOneTokenHasNoGenerationRow) {
  const json j = OneObject(Waste({"bench", kDemo, "-n", "1", "--reps", "2", "--json"}));
  ASSERT_EQ(j["rows"].size(), 1u) << j.dump();
  EXPECT_TRUE(j["rows"][0]["test"].get<std::string>().starts_with("pp ")) << j.dump();
  EXPECT_FALSE(j.contains("decode_tok_s")) << j.dump();
  EXPECT_TRUE(j.contains("prefill_tok_s")) << j.dump();
  const ProcessResult md = Waste({"bench", kDemo, "-n", "1"});
  ASSERT_EQ(md.exit_code, 0) << Describe(md);
  EXPECT_FALSE(Contains(md.out, "| tg ")) << Describe(md);
  EXPECT_TRUE(Contains(md.out, "no generation step")) << Describe(md);
  // Two tokens make one step: the row is back.
  const json two = OneObject(Waste({"bench", kDemo, "-n", "2", "--json"}));
  ASSERT_EQ(two["rows"].size(), 2u) << two.dump();
  EXPECT_EQ(two["rows"][1]["test"], "tg 2");
  EXPECT_GT(two["decode_tok_s"].get<double>(), 0.0);
}

TEST_F(CliHabits, ContextTooSmallNamesCtxAndThePromptLength) {
  const ProcessResult r = Waste({"run", kDemo, "--raw", "one two three four five six", "--ctx", "4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_TRUE(Contains(r.err, "the prompt is ") && Contains(r.err, "context holds 4") &&
              Contains(r.err, "raise --ctx"))
      << Describe(r);
}

TEST_F(CliHabits, SmallCacheHint) {
  const json plan = OneObject(Waste({"plan", kDemo, "--json"}));
  const std::string floor = std::to_string(plan["floor_bytes"].get<uint64_t>()) + "B";
  const ProcessResult r = Waste({"run", kDemo, "hi", "-n", "2", "--budget", floor});
  ASSERT_EQ(r.exit_code, 0) << Describe(r);
  EXPECT_TRUE(Contains(r.err, "smaller than one token's working set")) << Describe(r);
  const ProcessResult ok = Waste({"run", kDemo, "hi", "-n", "2"});
  EXPECT_FALSE(Contains(ok.err, "working set")) << Describe(ok);
  EXPECT_FALSE(Contains(ok.err, "MODEL")) << Describe(ok);
}

}  // namespace
}  // namespace waste::test
