// run: one generation. With a chat template the prompt is framed as a user
// turn and not echoed; without one (or --raw) it is continued as is and
// echoed first. Model text goes to stdout, notes and the statistics line to
// stderr (-q: the model's text only). --json prints one object at the end
// instead: generated ids, text (after stop-string handling), finish reason,
// seed and timings. Ctrl-C / SIGTERM stop the prompt or the generation at
// the next chunk or token; what was generated and the statistics are
// still printed, and the exit status is 130 / 143.
#include <cmath>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "engine_setup.h"
#include "generation.h"
#include "grammar_option.h"
#include "host.h"
#include "images.h"
#include "piece_writer.h"
#include "prompt.h"
#include "prompt_plan.h"
#include "reasoning_style.h"
#include "report.h"
#include "waste/chat.h"
#include "waste/files.h"
#include "waste/waste.h"

namespace waste::cli {

int RunCommand(const Options& o) {
  // Everything that can fail cheaply happens before the model is opened.
  // MODEL first: `waste run "some words"` names no container, and that,
  // not a missing prompt, is what to say.
  if (!CheckContainerPath(o)) return 1;
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
  // A bad grammar fails before the model opens.
  Result<std::shared_ptr<const Grammar>> grammar = LoadGrammarOption(o);
  if (!grammar.has_value()) {
    ReportFailure("grammar", grammar.error(), grammar.error().message(), o);
    return 1;
  }
  // --predict's text, read before the model opens like the grammar.
  std::string predicted;
  if (!o.predict_file.empty()) {
    Result<std::string> read =
        ReadRegularFile(o.predict_file, kMaxPromptFileBytes, "--predict file");
    if (!read) {
      ReportFailure("run", read.error(), read.error().message(), o);
      return 1;
    }
    predicted = std::move(*read);
  }
  InstallInterruptHandlers();
  const Clock::time_point load_start = Clock::now();
  std::unique_ptr<Engine> engine = OpenEngine(o);
  if (!engine) return 1;
  const double load_s = std::chrono::duration<double>(Clock::now() - load_start).count();
  std::vector<HeldImage> images;  // each --image file read once
  if (!HoldImages(*engine, o.images, &images) || !AttachHeldImages(*engine, images, !o.quiet)) {
    return 1;
  }
  PrintOpenNotes(*engine, o, /*budget_note=*/true);
  // --ids are fed as they are: no template.
  const std::optional<ChatTemplate> tmpl =
      o.ids_given ? std::nullopt : LoadTemplate(o, *engine, /*quiet=*/o.quiet);

  // Templated = system turn, user turn, hand-over; else the prompt as
  // markup, echoed; each --image's media block before the text.
  const PromptPlan plan = BuildRunPrompt(tmpl ? &*tmpl : nullptr, o.raw, o.system,
                                         MediaBlocksFor(images), prompt);
  std::vector<int> ids = o.ids;
  if (!o.ids_given && !TokenizeSegments(*engine, plan.segments, o, &ids)) return 1;
  if (!ExpandImagePads(*engine, &ids, "run")) return 1;
  if (ids.size() + 1 > o.ctx) {
    Status too_long(Errc::kArg, "");
    ReportFailure("run", too_long, ContextTooSmall(ids.size(), o.ctx, 0), o);
    return 1;
  }
  const bool echo = o.ids_given || plan.echo_prompt;
  // Before the echo: a stderr line after it would land inside the text.
  const uint64_t seed = ChooseSeed(o);
  if (o.verbose && !o.json) std::fprintf(stderr, "waste: seed %llu\n", (unsigned long long)seed);

  // Raw continuation: the user sees their text, then what follows it.
  // -q keeps the model's text and drops everything else (echo included).
  const bool stream_out = !o.json;
  if (echo && stream_out && !o.quiet) {
    if (o.ids_given) {
      Result<std::string> text = engine->Detokenize(ids);
      if (text.has_value()) WriteOut(*text);
    } else {
      WriteOut(prompt);
    }
  }

  std::string text;  // what the user got, for --json
  // On a terminal a reasoning model's thinking prints faint (--json and a
  // pipe get the text as it is).
  ReasoningStyle style = TerminalReasoningStyle(
      tmpl ? &*tmpl : nullptr, stream_out && !o.json && StreamIsTerminal(1),
      [](std::string_view bytes) { WriteOut(bytes); },
      [](std::string_view code) { WriteOut(code); });
  PieceWriter stream(StopFor(o, plan), [&](std::string_view bytes) {
    if (o.json) text.append(bytes);
    if (stream_out) style.Push(bytes);
  });
  TokenTally tally;
  std::vector<int> generated;
  GenParams params = ParamsFromOptions(o, seed);
  std::vector<int> prediction;
  if (!predicted.empty()) {
    // As markup: a reply's text holds its special tokens as text, and a
    // prediction only steers the guesses.
    Result<std::vector<int>> p = engine->Tokenize(predicted, /*markup=*/true, /*add_bos=*/false);
    if (!p) {
      ReportFailure("run", p.error(), "--predict: " + p.error().message(), o);
      return 1;
    }
    prediction = std::move(*p);
    params.draft_prediction = prediction;
  }
  GenerationTimer timer(!o.quiet && !o.json && StderrIsTerminal());
  timer.Watch(&params);
  std::unique_ptr<BudgetedGrammar> constraint;
  if (*grammar) {
    // The output may end, once complete, with end of sequence or the
    // template's end-of-turn token.
    std::vector<int> end_ids;
    if (engine->info().eos_id >= 0) end_ids.push_back(engine->info().eos_id);
    for (const std::string& stop : StopFor(o, plan)) {
      Result<std::vector<int>> id = engine->Tokenize(stop, /*markup=*/true, /*add_bos=*/false);
      if (id.has_value() && id->size() == 1) end_ids.push_back((*id)[0]);
    }
    constraint = std::make_unique<BudgetedGrammar>(*grammar, Vocabulary::FromEngine(*engine, end_ids),
                                                   params.max_tokens, std::vector<int>{}, end_ids);
    params.constraint = constraint.get();
  }
  std::unique_ptr<ThinkTagBudget> reasoning_cap;
  if (ReasoningCapApplies(tmpl ? &*tmpl : nullptr, o)) {
    reasoning_cap = ReasoningCap(*engine, *tmpl, o, constraint.get());
    if (reasoning_cap) params.constraint = reasoning_cap.get();
  }
  const Stats before = engine->stats();
  const Result<FinishReason> finished = engine->Generate(ids, params, [&](const TokenEvent& e) {
    timer.Token();
    tally.Add(e);
    generated.push_back(e.token);
    // The end-of-text token ends the text; its spelling is not part of it.
    if (e.token == engine->info().eos_id && !o.ignore_eos) return !Interrupted();
    return stream.Push(e.piece) && !Interrupted();
  });
  stream.Finish();
  style.Finish();
  const Stats after = engine->stats();
  if (!o.json) WriteOut("\n");
  const Status status = !finished ? finished.error()
                        : *finished == FinishReason::kCancelled
                            ? Status(Errc::kCancelled, "cancelled by callback")
                            : Status::Ok();

  const bool cancelled = Interrupted();
  if (constraint && !constraint->complete() && !cancelled && !o.json && !o.quiet) {
    std::fprintf(stderr, "waste: warning: the output does not complete the grammar (raise -n)\n");
  }
  const bool stopped_by_string = status.code() == Errc::kCancelled && stream.stopped();
  if (!status.ok() && !stopped_by_string && !cancelled) {
    ReportFailure("generate", status, DetailOf(status, *engine), o);
    return 1;
  }
  // Stopped on a full context: still a success.
  const bool context_full = status.ok() && !engine->error_detail().empty();
  if (context_full && !o.json && !o.quiet) {  // --json says "context" instead
    std::fprintf(stderr, "\nwaste: the context is full (--ctx %u; prompt %zu + %llu generated): "
                 "raise --ctx to go further\n",
                 o.ctx, ids.size(), static_cast<unsigned long long>(tally.tokens));
  }
  RunTimings timings = timer.Finish(before, after, tally);
  timings.load_s = load_s;
  if (o.json) {
    const char* finish = cancelled                                                  ? "cancelled"
                         : stopped_by_string                                        ? "stop"
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
    j["seed"] = seed;
    if (constraint) j["grammar_complete"] = constraint->complete();
    AddTimings(timings, &j);
    std::printf("%s\n", DumpJson(j).c_str());
  } else if (!o.quiet) {
    if (cancelled) std::fputs("waste: cancelled\n", stderr);
    std::fprintf(stderr, "%s\n", StatsLine(timings).c_str());
  }
  if (o.learn && !cancelled) {
    // The hotlist is an optimisation; failing to save it is not a failed
    // run (exit 0), but the user is told why (read-only dir, full disk, a
    // --usage path that is not a hotlist).
    Status saved = engine->SaveUsage();
    if (!saved.ok()) {
      std::fprintf(stderr, "waste: warning: --learn: hotlist not saved: %s\n",
                   saved.message().c_str());
    }
  }
  return cancelled ? InterruptExitCode() : 0;
}

}  // namespace waste::cli
