#include "engine_setup.h"

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "help.h"
#include "report.h"

namespace waste::cli {
namespace {

bool Contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

bool MentionsCpus(const std::string& s) {
  return s.empty() || Contains(s, "cpu") || Contains(s, "CPU");
}

// A failure's lines: stderr, or (with --json) gathered into one
// {"error": ...} object on stdout by FailureReport's destructor.
std::vector<std::string>* g_collect = nullptr;

void Line(const std::string& s) {
  if (g_collect != nullptr) {
    g_collect->push_back(s);
  } else {
    std::fprintf(stderr, "%s\n", s.c_str());
  }
}

class FailureReport {
 public:
  FailureReport(bool json, std::string code) : json_(json), code_(std::move(code)) {
    if (json_) g_collect = &lines_;
  }
  ~FailureReport() {
    if (!json_) return;
    g_collect = nullptr;
    std::string message;
    for (const std::string& l : lines_) message += (message.empty() ? "" : "\n") + l;
    PrintJsonError(code_, message);
  }

 private:
  bool json_;
  std::string code_;
  std::vector<std::string> lines_;
};

}  // namespace

void PrintJsonError(const std::string& code, const std::string& message) {
  Json j;
  j["error"]["code"] = code;
  j["error"]["message"] = message;
  std::printf("%s\n", DumpJson(j).c_str());
  std::fflush(stdout);
}

Config ConfigFromOptions(const Options& o) {
  Config c;
  c.ram_budget_bytes = o.budget_bytes;
  c.ctx_tokens = o.ctx;
  c.threads = o.threads;
  c.cpu_list = o.cpus;
  c.verify_records = o.verify;
  c.direct_io = o.no_direct_io ? 0 : -1;
  c.cache_policy = o.cache_policy;
  c.usage_path = o.usage_path;
  c.exclusive_open = o.exclusive_open;
  c.vision = !o.images.empty();  // the tower is loaded only when asked (--image)
  // chat takes back a message stopped or failed before its reply.
  c.rewind_marks = o.command == Command::kChat ? 1 : 0;
  c.draft_tokens = o.draft;
  return c;
}

void ReportFailure(const std::string& what, const Status& status, const std::string& detail,
                   const Options& o) {
  FailureReport report(o.json, ErrcName(status.code()));
  const std::string text = ErrcText(status.code());
  const Errc code = status.code();
  if (what == "open" && o.cpus_given && code == Errc::kArg && MentionsCpus(detail)) {
    Line(Contains(detail, "not a cpu list") || detail.empty() ? "--cpus: not a cpu list: " + o.cpus
                                                              : "--cpus: " + detail);
    Line(what + ": " + text);
    return;
  }
  if (what == "open" && o.cpus_given && code == Errc::kUnsupported && MentionsCpus(detail)) {
    Line(
        "--cpus: binding threads to CPUs needs Linux or Windows; drop --cpus (and WASTE_CPUS) "
        "on this system");
    Line(what + ": " + text);
    return;
  }
  if (what == "open" && code == Errc::kBusy) {
    Line("--exclusive-open: another process owns " + o.model() +
         " (it holds the container lock); close it or open without --exclusive-open");
    Line(what + ": " + text);
    return;
  }
  if (code == Errc::kRamBudget) {
    Line(what + ": " + text);
    if (!detail.empty()) Line("  " + detail);
    if (o.command != Command::kPlan) {  // plan has just printed what it can
      Line("  (run `waste plan " + (o.positionals.empty() ? std::string("MODEL") : o.model()) +
           (o.ctx != 4096 ? " --ctx " + std::to_string(o.ctx) : std::string()) +
           "` to see the floor)");
    }
    return;
  }
  if ((what == "tokenize" || what == "detokenize") && code == Errc::kUnsupported) {
    Line(what + ": " + NoTokenizer(o));
    return;
  }
  if (status.failed_expert()) {  // one expert record could not be read or was damaged
    Line(what + ": " + text);
    Line("  " + detail);
    if (code == Errc::kIo) {
      Line(
          "  the container is damaged or truncated: re-download or re-convert it (`--verify` "
          "checks the crc32 of every record as it is read)");
    }
    return;
  }
  if (Contains(detail, "context of")) {  // the prompt does not fit
    Line(what + ": " + text);
    Line("  " + detail);
    return;
  }
  // Container problems, explained first as the reference's library did.
  if (!detail.empty()) Line("waste: " + detail);
  Line(what + ": " + text);
}

std::string DetailOf(const Status& status, const Engine& engine) {
  if (!status.message().empty()) return status.message();
  return engine.error_detail();
}

std::string NoTokenizer(const Options& o) {
  const bool takes_ids =
      o.command == Command::kRun || o.command == Command::kEval || o.command == Command::kBench;
  return o.model() + " has no tokenizer (no tokenizer.model or tiktoken.model)" +
         (takes_ids ? "; give token ids with --ids \"1 2 3\" instead of text"
                    : ": waste " + o.command_name +
                          " needs text; run, eval and bench take token ids with --ids");
}

bool CheckContainerPath(const Options& o) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir(o.model());
  std::string problem;
  if (!fs::exists(dir, ec)) {
    problem = "no such directory: " + o.model();
  } else if (!fs::is_directory(dir, ec)) {
    problem = o.model() + " is a file; MODEL is a container directory (the folder holding "
              "manifest.json)";
  } else if (!fs::exists(dir / "manifest.json", ec)) {
    problem = "not a waste container: " + o.model() + " (no manifest.json)";
  }
  if (problem.empty()) return true;
  FailureReport report(o.json, "not_a_container");
  Line(problem);
  return false;
}

std::unique_ptr<Engine> OpenEngine(const Options& o) {
  if (!CheckContainerPath(o)) return nullptr;
  Result<std::unique_ptr<Engine>> opened = Engine::Open(o.model(), ConfigFromOptions(o));
  if (!opened.has_value()) {
    ReportFailure("open", opened.error(), opened.error().message(), o);
    return nullptr;
  }
  std::unique_ptr<Engine> engine = std::move(opened).value();
  if (!o.quiet) {
    const MemoryUsage used = engine->memory_used();
    std::string warning =
        OverCapWarning(used.trunk_bytes + used.state_bytes + used.scratch_bytes +
                           used.expert_cache_bytes,
                       UsableRam(), o.model());
    if (!warning.empty()) Line(warning);
  }
  return engine;
}

void PrintOpenNotes(const Engine& engine, const Options& o, bool budget_note) {
  if (o.quiet) return;
  if (budget_note && !o.budget_given) Line(BudgetNote(engine.memory_used(), UsableRam()));
  // manifest.json only: cheap next to the open that just happened.
  if (Result<MemPlan> plan = PlanMemory(o.model(), o.ctx); plan.has_value()) {
    std::string hint = SmallCacheHint(engine.memory_used().expert_cache_bytes,
                                      plan->working_set_bytes, o.model());
    if (!hint.empty()) Line(hint);
  }
  if (!engine.stats().direct_io) {
    Line(
        "waste: page cache not bypassed on this filesystem: expert hit rates include the "
        "kernel's cache");
  }
}

bool TokenizeSegments(const Engine& engine, std::span<const PromptSegment> segments,
                      const Options& o, std::vector<int>* ids) {
  Result<std::vector<int>> tokens = engine.TokenizeSegments(segments, /*add_bos=*/false);
  if (!tokens.has_value()) {
    ReportFailure("tokenize", tokens.error(), DetailOf(tokens.error(), engine), o);
    return false;
  }
  *ids = std::move(tokens).value();
  return true;
}

std::optional<ChatTemplate> LoadTemplate(const Options& o, const Engine& engine, bool quiet) {
  if (o.raw) return std::nullopt;
  Result<std::optional<ChatTemplate>> loaded = engine.FindChatTemplate();
  if (!loaded.has_value()) {
    if (!quiet) Line("waste: " + loaded.error().message() + "; continuing without a template");
    return std::nullopt;
  }
  return std::move(loaded).value();
}

bool ReasoningCapApplies(const ChatTemplate* tmpl, const Options& o) {
  if (o.reasoning_budget < 0) return false;
  if (tmpl != nullptr && !tmpl->think_open.empty()) return true;
  if (!o.quiet) Line("waste: --reasoning-budget: this chat format has no <think> tags to close; no cap");
  return false;
}

std::unique_ptr<ThinkTagBudget> ReasoningCap(const Engine& engine, const ChatTemplate& tmpl,
                                             const Options& o, TokenConstraint* inner) {
  return ThinkTagBudget::ForTemplate(engine, tmpl, o.reasoning_budget, inner);
}

std::vector<std::string> StopFor(const Options& o, const PromptPlan& plan) {
  if (o.stop_given) return o.stops;
  return plan.default_stops;
}

int Failure(const Options& o, const std::string& code, const std::string& message) {
  FailureReport report(o.json, code);
  Line(message);
  return 1;
}

int UsageFailure(const Options& o, const std::string& message) {
  if (o.json) {
    PrintJsonError("usage", message);
    return 2;
  }
  Line(message);
  Line(UsageHint(o.command));
  return 2;
}

std::string ContextTooSmall(uint64_t prompt_tokens, uint32_t ctx, int position) {
  std::string where = position > 0 ? " (" + std::to_string(position) + " already used)" : "";
  return "the prompt is " + std::to_string(prompt_tokens) + " tokens but the context holds " +
         std::to_string(ctx) + where + ", with one position kept for the reply: raise --ctx "
         "(e.g. --ctx " + std::to_string((prompt_tokens + 1 + static_cast<uint64_t>(position)) * 2) +
         ") or shorten the prompt";
}

void WriteOut(std::string_view bytes) {
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  std::fflush(stdout);
}

}  // namespace waste::cli
