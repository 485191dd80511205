#include "engine_setup.h"

#include <cstdio>

#include "help.h"
#include "report.h"

namespace waste::cli {
namespace {

bool Contains(const std::string& s, const char* what) { return s.find(what) != std::string::npos; }

bool MentionsCpus(const std::string& s) {
  return s.empty() || Contains(s, "cpu") || Contains(s, "CPU");
}

void Line(const std::string& s) { std::fprintf(stderr, "%s\n", s.c_str()); }

}  // namespace

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
  return c;
}

void ReportFailure(const std::string& what, const Status& status, const std::string& detail,
                   const Options& o) {
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
    Line("  (run `waste plan " + (o.positionals.empty() ? std::string("MODEL") : o.model()) +
         "` to see the floor)");
    return;
  }
  if (detail.rfind("expert ", 0) == 0) {  // a failed expert read (§5.6)
    Line(what + ": " + text);
    Line("  " + detail);
    if (code == Errc::kIo) {
      Line(
          "  the container is damaged or truncated: re-download or re-convert it, then check "
          "every record with the reference's verify tool");
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

std::unique_ptr<Engine> OpenEngine(const Options& o) {
  Result<std::unique_ptr<Engine>> opened = Engine::Open(o.model(), ConfigFromOptions(o));
  if (!opened.has_value()) {
    ReportFailure("open", opened.error(), opened.error().message(), o);
    return nullptr;
  }
  std::unique_ptr<Engine> engine = std::move(opened).value();
  if (!o.quiet) {
    std::string warning = OverCapWarning(engine->memory_used().budget_bytes, UsableRam());
    if (!warning.empty()) Line(warning);
  }
  return engine;
}

void PrintOpenNotes(const Engine& engine, const Options& o, bool budget_note) {
  if (o.quiet) return;
  if (budget_note && !o.budget_given) Line(BudgetNote(engine.memory_used(), UsableRam()));
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

std::optional<ChatTemplate> LoadTemplate(const Options& o, bool quiet) {
  if (o.raw) return std::nullopt;
  Result<std::optional<ChatTemplate>> loaded = ChatTemplate::Load(o.model());
  if (!loaded.has_value()) {
    if (!quiet) Line("waste: " + loaded.error().message() + "; continuing without a template");
    return std::nullopt;
  }
  return std::move(loaded).value();
}

std::string StopFor(const Options& o, const PromptPlan& plan) {
  return o.stop_given ? o.stop : plan.default_stop;
}

int UsageFailure(const Options& o, const std::string& message) {
  Line(message);
  Line(UsageHint(o.command));
  return 2;
}

void WriteOut(std::string_view bytes) {
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  std::fflush(stdout);
}

}  // namespace waste::cli
