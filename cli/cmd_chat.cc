// chat: a line REPL that keeps the conversation between turns (ENGINE.md
// §1.5, §1.6). Ctrl-C stops the reply being generated, not the program:
// the SIGINT handler only sets a flag that the token callback reads. At the
// prompt (nothing generating) Ctrl-C leaves, as in a shell.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "commands.h"
#include "prompt_plan.h"
#include "engine_setup.h"
#include "images.h"
#include "generation.h"
#include "piece_writer.h"
#include "report.h"
#include "waste/chat.h"
#include "waste/waste.h"

namespace waste::cli {
namespace {

// Lock-free atomics are safe to touch from a signal handler.
std::atomic<bool> g_generating{false};
std::atomic<bool> g_interrupted{false};

extern "C" void OnSigint(int) {
  // Some C libraries reset the handler to the default on delivery.
  std::signal(SIGINT, OnSigint);
  if (g_generating.load()) {
    g_interrupted.store(true);
  } else {
    std::_Exit(130);
  }
}

constexpr char kCommandsLine[] =
    "commands: /reset /stats /save FILE /load FILE /image FILE /help — Ctrl-D exits, Ctrl-C "
    "stops a reply";

void Say(const std::string& text) { WriteOut(text + "\n"); }

// "/cmd" or "/cmd ARG": true and `arg` set when `line` is that command.
bool IsCommand(const std::string& line, const char* name, std::string* arg) {
  std::string n = name;
  if (line == n) {
    arg->clear();
    return true;
  }
  if (line.size() > n.size() + 1 && line.compare(0, n.size(), n) == 0 && line[n.size()] == ' ') {
    *arg = line.substr(n.size() + 1);
    return true;
  }
  return false;
}

void PrintStats(const Engine& engine) {
  Stats s = engine.stats();
  double rate = s.sec_total > 0 ? double(s.tokens_generated) / s.sec_total : 0.0;
  char line[256];
  std::snprintf(line, sizeof line,
                "%llu tokens, %.2f tok/s, experts %llu hit / %llu miss (%d%%), "
                "%.2f GB read",
                static_cast<unsigned long long>(s.tokens_generated), rate,
                static_cast<unsigned long long>(s.experts_hit),
                static_cast<unsigned long long>(s.experts_missed),
                HitPercent(s.experts_hit, s.experts_missed),
                double(s.bytes_read) / (1024.0 * 1024.0 * 1024.0));
  Say(line);
}

}  // namespace

int ChatCommand(const Options& o) {
  const std::optional<ChatTemplate> loaded = LoadTemplate(o, /*quiet=*/false);
  const ChatTemplate* tmpl = loaded && loaded->usable() ? &*loaded : nullptr;
  const bool templated = tmpl != nullptr;

  std::unique_ptr<Engine> engine = OpenEngine(o);
  if (!engine) return 1;
  PrintOpenNotes(*engine, o, /*budget_note=*/false);

  Say(BuildInfo());
  if (templated) {
    Say("chat format from " + o.model() + "/chat.json");
  } else if (o.raw) {
    Say("raw continuation (--raw)");
  } else {
    Say("no chat.json in " + o.model() + ": each line is continued as plain text,");
    Say("so an instruct model is being asked to continue text, not to answer");
  }
  Say(kCommandsLine);

  if (const std::vector<PromptSegment> system = BuildChatSystemTurn(tmpl, o.system);
      !system.empty()) {
    std::vector<int> ids;
    if (!TokenizeSegments(*engine, system, o, &ids)) return 1;
    Result<std::span<const float>> logits = engine->Eval(ids);
    if (!logits.has_value()) {
      ReportFailure("system prompt", logits.error(), DetailOf(logits.error(), *engine), o);
      return 1;
    }
  }

  const GenParams params = ParamsFromOptions(o);
  std::signal(SIGINT, OnSigint);

  // Images wait here until the next message is sent (--image: the first).
  std::vector<std::string> images = o.images;
  std::string line;
  for (;;) {
    WriteOut("\n> ");
    if (!std::getline(std::cin, line)) {
      WriteOut("\n");
      return 0;  // EOF (Ctrl-D)
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;

    std::string arg;
    if (IsCommand(line, "/reset", &arg)) {
      engine->ResetState();
      engine->ClearImages();
      images.clear();
      Say("(state cleared)");
      continue;
    }
    if (IsCommand(line, "/stats", &arg)) {
      PrintStats(*engine);
      continue;
    }
    if (IsCommand(line, "/help", &arg)) {
      Say(kCommandsLine);
      continue;
    }
    if (IsCommand(line, "/save", &arg) && !arg.empty()) {
      Status s = engine->SaveState(arg);
      Say(s.ok() ? "(saved to " + arg + ")"
                 : "(save failed: " + s.ToString() + ")");
      continue;
    }
    if (IsCommand(line, "/load", &arg) && !arg.empty()) {
      Status s = engine->LoadState(arg);
      Say(s.ok() ? "(loaded " + arg + " — continuing that conversation)"
                 : "(load failed: " + s.ToString() + ")");
      continue;
    }
    if (IsCommand(line, "/image", &arg) && !arg.empty()) {
      if (!engine->has_vision()) {
        Say("(" + arg + (o.images.empty() ? ": images need the model opened with --image)"
                                          : ": this container has no vision tower)"));
      } else if (images.size() >= static_cast<size_t>(kMaxQueuedImages)) {
        Say("(too many images)");
      } else {
        images.push_back(arg);
        Say("(" + arg + " attached to the next message)");
      }
      continue;
    }

    // Attached images are encoded now; a failure drops them and the line.
    const std::vector<std::string> blocks = MediaBlocksFor(images);
    const bool images_ok = AttachImages(*engine, images, o);
    images.clear();
    if (!images_ok) {
      engine->ClearImages();
      continue;
    }
    const PromptPlan turn = BuildChatTurn(tmpl, blocks, line);
    std::vector<int> ids;
    if (!TokenizeSegments(*engine, turn.segments, o, &ids)) continue;
    if (!ExpandImagePads(*engine, &ids, "chat")) {
      engine->ClearImages();
      continue;
    }
    if (turn.echo_prompt) WriteOut(line);  // raw continuation shows what it continues

    PieceWriter stream(StopFor(o, turn), [](std::string_view bytes) { WriteOut(bytes); });
    g_interrupted.store(false);
    g_generating.store(true);
    const Result<FinishReason> finished = engine->Generate(ids, params, [&](const TokenEvent& e) {
      if (g_interrupted.load()) return false;
      return stream.Push(e.piece);
    });
    g_generating.store(false);
    stream.Finish();
    const Status status = !finished ? finished.error()
                          : *finished == FinishReason::kCancelled
                              ? Status(Errc::kCancelled, "cancelled by callback")
                              : Status::Ok();

    if (status.code() == Errc::kCancelled && !stream.stopped()) {
      WriteOut("\n(stopped)");
    } else if (!status.ok() && status.code() != Errc::kCancelled) {
      WriteOut("\n");
      ReportFailure("generate", status, DetailOf(status, *engine), o);
    } else if (status.ok() && !engine->error_detail().empty()) {
      std::fprintf(stderr, "\nwaste: %s\n", engine->error_detail().c_str());
    }
    WriteOut("\n");
  }
}

}  // namespace waste::cli
