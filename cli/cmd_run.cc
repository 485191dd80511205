// run: one generation (ENGINE.md §1.5, §1.6). With a chat template the
// prompt is framed as a user turn and not echoed; without one (or --raw) it
// is continued as is and echoed first. Model text goes to stdout, notes and
// the stats line to stderr. --json (W) prints one object at the end instead:
// generated ids, text (after stop-string handling) and the stats.
#include <cmath>
#include <optional>
#include <cstdio>
#include <string>
#include <vector>

#include "commands.h"
#include "prompt_plan.h"
#include "engine_setup.h"
#include "generation.h"
#include "images.h"
#include "piece_writer.h"
#include "prompt.h"
#include "report.h"
#include "waste/chat.h"
#include "waste/waste.h"

namespace waste::cli {

int RunCommand(const Options& o) {
  // Everything that can fail cheaply happens before the model is opened.
  std::string prompt;
  if (o.ids_given) {
    if (o.ids.empty()) {
      return UsageFailure(o, "no prompt: give one as an argument, with --file, or on stdin");
    }
  } else {
    PromptText p = ReadPrompt(o, "no prompt: give one as an argument, with --file, or on stdin");
    if (!p.ok) return UsageFailure(o, p.error);
    prompt = std::move(p.text);
  }
  // --ids are fed as they are: no template.
  const std::optional<ChatTemplate> tmpl =
      o.ids_given ? std::nullopt : LoadTemplate(o, /*quiet=*/o.quiet);

  std::unique_ptr<Engine> engine = OpenEngine(o);
  if (!engine) return 1;
  if (!AttachImages(*engine, o.images, o)) return 1;
  PrintOpenNotes(*engine, o, /*budget_note=*/true);

  // ENGINE.md §1.5: templated = system turn, user turn, hand-over; else the
  // prompt as markup, echoed; each --image's media block before the text.
  const PromptPlan plan = BuildRunPrompt(tmpl ? &*tmpl : nullptr, o.raw, o.system,
                                         MediaBlocksFor(o.images), prompt);
  std::vector<int> ids = o.ids;
  if (!o.ids_given && !TokenizeSegments(*engine, plan.segments, o, &ids)) return 1;
  if (!ExpandImagePads(*engine, &ids, "run")) return 1;
  const bool echo = o.ids_given || plan.echo_prompt;
  const std::string stop = StopFor(o, plan);

  // Raw continuation: the user sees their text, then what follows it.
  const bool stream_out = !o.quiet && !o.json;
  if (echo && stream_out) {
    if (o.ids_given) {
      Result<std::string> text = engine->Detokenize(ids);
      if (text.has_value()) WriteOut(*text);
    } else {
      WriteOut(prompt);
    }
  }

  std::string text;  // what the user got, for --json
  PieceWriter stream(stop, [&](std::string_view bytes) {
    if (o.json) text.append(bytes);
    if (stream_out) WriteOut(bytes);  // -q: nothing but the final newline (R)
  });
  TokenTally tally;
  std::vector<int> generated;
  const GenParams params = ParamsFromOptions(o);
  const Result<FinishReason> finished = engine->Generate(ids, params, [&](const TokenEvent& e) {
    tally.Add(e);
    generated.push_back(e.token);
    return stream.Push(e.piece);
  });
  stream.Finish();
  if (!o.json) WriteOut("\n");
  const Status status = !finished ? finished.error()
                        : *finished == FinishReason::kCancelled
                            ? Status(Errc::kCancelled, "cancelled by callback")
                            : Status::Ok();

  const bool stopped_by_string = status.code() == Errc::kCancelled && stream.stopped();
  if (!status.ok() && !stopped_by_string) {
    ReportFailure("generate", status, DetailOf(status, *engine), o);
    return 1;
  }
  // Stopped on a full context: still a success (§1.6).
  const bool context_full = status.ok() && !engine->error_detail().empty();
  if (context_full) std::fprintf(stderr, "\nwaste: %s\n", engine->error_detail().c_str());
  if (o.json) {
    const char* finish = stopped_by_string                                          ? "stop"
                         : context_full                                             ? "context"
                         : tally.tokens >= static_cast<uint64_t>(params.max_tokens) ? "length"
                                                                                    : "eos";
    const double seconds = tally.ms / 1000.0;
    Json j;
    j["prompt_tokens"] = ids.size();
    j["ids"] = generated;
    j["text"] = text;
    j["finish"] = finish;
    j["tokens"] = tally.tokens;
    j["seconds"] = std::round(seconds * 1e4) / 1e4;
    j["tok_per_s"] = std::round((seconds > 0 ? double(tally.tokens) / seconds : 0.0) * 1e4) / 1e4;
    j["experts_hit"] = tally.hit;
    j["experts_missed"] = tally.miss;
    j["bytes_read"] = tally.bytes;
    std::printf("%s\n", DumpJson(j).c_str());
  } else if (!o.quiet && tally.tokens > 0) {
    std::fprintf(stderr, "\n%s\n",
                 StatsLine(tally.tokens, tally.ms / 1000.0, tally.hit, tally.miss).c_str());
  }
  if (o.learn) {
    // The hotlist is an optimisation; failing to save it is not a failed
    // run (exit 0), but the user is told why (read-only dir, full disk, a
    // --usage path that is not a hotlist).
    Status saved = engine->SaveUsage();
    if (!saved.ok()) {
      std::fprintf(stderr, "waste: warning: --learn: hotlist not saved: %s\n",
                   saved.message().c_str());
    }
  }
  return 0;
}

}  // namespace waste::cli
