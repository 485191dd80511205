// chat: a REPL that keeps the conversation between turns (docs/CLI.md
// "chat"). Input comes through LineReader (line editing and history on a
// terminal, '\' and """ for several lines). Ctrl-C stops the reply being
// made (prompt or generation), not the program; at the prompt it leaves
// (exit 130), as in a shell; SIGTERM ends the reply and the program (143).
// When the context is full, the oldest turns are dropped and the rest
// re-read, so the conversation goes on.
#include <cstdio>
#include <deque>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat_history.h"
#include "commands.h"
#include "engine_setup.h"
#include "generation.h"
#include "host.h"
#include "images.h"
#include "line_reader.h"
#include "piece_writer.h"
#include "prompt_plan.h"
#include "reasoning_style.h"
#include "report.h"
#include "waste/chat.h"
#include "waste/waste.h"

namespace waste::cli {
namespace {

struct ChatCommandDoc {
  const char* name;
  const char* args;
  const char* help;
};
constexpr ChatCommandDoc kChatCommands[] = {
    {"/help", "", "this list"},
    {"/exit", "", "leave (also /quit, /bye, Ctrl-D)"},
    {"/reset", "", "forget the conversation and zero /stats"},
    {"/stats", "", "context fill and this session's counters"},
    {"/timings", "", "statistics line after each reply on or off"},
    {"/save", "FILE", "save the conversation state to FILE"},
    {"/load", "FILE", "continue a conversation saved with /save"},
    {"/load --force", "FILE", "... even one saved from another container of the same shape"},
    {"/image", "FILE", "attach an image (needs a vision tower)"},
    {"/retry", "", "the last reply again, sampled anew (greedy: the same text)"},
    {"/undo", "", "take back the last message and its reply"},
};

void Say(const std::string& text) { WriteOut(text + "\n"); }

void SayHelp() {
  Say("commands:");
  for (const ChatCommandDoc& c : kChatCommands) {
    std::string head = std::string(c.name) + (*c.args ? std::string(" ") + c.args : "");
    Say("  " + head + std::string(head.size() < 14 ? 14 - head.size() : 1, ' ') + c.help);
  }
  Say("input: a line ending in \\ continues on the next; \"\"\" on its own line opens a block");
  Say("       up to the next \"\"\"; start a message with // to send text beginning with /");
  Say("keys:  Ctrl-C stops a reply (at the prompt: leaves), Ctrl-D leaves");
}

// "/cmd ARG" -> ("/cmd", "ARG").
std::pair<std::string, std::string> SplitCommand(const std::string& line) {
  size_t space = line.find(' ');
  if (space == std::string::npos) return {line, ""};
  size_t arg = line.find_first_not_of(' ', space);
  return {line.substr(0, space), arg == std::string::npos ? "" : line.substr(arg)};
}

// Why a /save or /load of `path` failed, in words.
std::string FileFailure(const std::string& path, const Status& s, bool loading) {
  namespace fs = std::filesystem;
  std::error_code ec;
  std::string reason;
  if (loading && !fs::exists(path, ec)) {
    reason = "no such file";
  } else if (loading && fs::is_directory(path, ec)) {
    reason = "is a directory";
  } else if (!s.message().empty()) {
    if (s.message().find(path) != std::string::npos) return s.message();  // names it already
    reason = s.message();
  } else {
    reason = ErrcText(s.code());
  }
  return path + ": " + reason;
}

// Per-session counters behind /stats (zeroed by /reset).
struct SessionCounters {
  uint64_t replies = 0;  // exchanges kept (a message taken back is work, not a reply)
  RunTimings total;  // summed over every call; load and first token stay unset
  void Add(const RunTimings& t, bool kept) {
    if (kept) ++replies;
    total.prompt_tokens += t.prompt_tokens;
    total.prompt_s += t.prompt_s;
    total.tokens += t.tokens;
    total.gen_s += t.gen_s;
    total.hit += t.hit;
    total.miss += t.miss;
    total.bytes_read += t.bytes_read;
    total.drafted += t.drafted;
    total.draft_kept += t.draft_kept;
  }
};

// `loaded_from`: the /load whose conversation the context starts with (its
// turns are not counted: the state file holds positions, not turns).
void PrintStats(const Engine& engine, const Options& o, const SessionCounters& c,
                size_t turns_kept, size_t turns_dropped, const std::string& loaded_from) {
  const int pos = engine.position();
  Say("context   " + std::to_string(pos) + " / " + std::to_string(o.ctx) + " tokens (" +
      std::to_string(o.ctx > 0 ? (100ull * uint64_t(pos)) / o.ctx : 0) + "% full), " +
      (loaded_from.empty() ? "" : "the conversation loaded from " + loaded_from + " and ") +
      std::to_string(turns_kept) + (turns_kept == 1 ? " turn" : " turns") +
      (loaded_from.empty() ? "" : " since") +
      (turns_dropped > 0 ? ", " + std::to_string(turns_dropped) + " oldest dropped" : ""));
  std::string line = StatsLine(c.total);
  // The session has no single "first token": drop that part.
  size_t ft = line.find(" | first token");
  if (ft != std::string::npos) line.erase(ft, line.find('|', ft + 3) - 1 - ft);
  Say("session   " + std::to_string(c.replies) + " replies " + line);
}

}  // namespace

int ChatCommand(const Options& o) {
  std::unique_ptr<Engine> engine = OpenEngine(o);
  if (!engine) return 1;
  const std::optional<ChatTemplate> loaded = LoadTemplate(o, *engine, /*quiet=*/o.quiet);
  const ChatTemplate* tmpl = loaded && loaded->usable() ? &*loaded : nullptr;
  const bool templated = tmpl != nullptr;
  if (!engine->info().has_tokenizer) {  // every message would fail
    return Failure(o, "unsupported", "chat: " + NoTokenizer(o));
  }
  PrintOpenNotes(*engine, o, /*budget_note=*/false);

  if (!o.quiet) {
    Say(BuildInfo());
    if (templated) {
      Say(tmpl->stock_name.empty()
              ? "chat format from " + tmpl->Source(o.model())
              : "chat format: " + tmpl->Source(o.model()) + " (no chat.json; the tokenizer has its markers)");
    } else if (o.raw) {
      Say("raw continuation (--raw)");
    } else {
      Say("no chat.json in " + o.model() + " and no built-in format fits its tokenizer:");
      Say("each line is continued as plain text,");
      Say("so an instruct model is being asked to continue text, not to answer");
    }
    Say("/help lists the commands; /exit or Ctrl-D leaves, Ctrl-C stops a reply");
  }
  const bool cap_reasoning = ReasoningCapApplies(tmpl, o);  // (says once why not)

  ChatHistory history;
  if (const std::vector<PromptSegment> system = BuildChatSystemTurn(tmpl, o.system);
      !system.empty()) {
    if (!TokenizeSegments(*engine, system, o, &history.system_ids)) return 1;
    Result<std::span<const float>> logits = engine->Eval(history.system_ids);
    if (!logits.has_value()) {
      ReportFailure("system prompt", logits.error(), DetailOf(logits.error(), *engine), o);
      return 1;
    }
  }

  const uint64_t seed = ChooseSeed(o);
  if (o.verbose) std::fprintf(stderr, "waste: seed %llu\n", static_cast<unsigned long long>(seed));
  InstallInterruptHandlers();

  LineReader reader;
  SessionCounters counters;
  bool timings_on = !o.quiet;
  // The session holds less than `history` says (a re-read failed): the
  // next message re-reads first.
  bool stale = false;
  std::string loaded_from;  // a /load's conversation, which cannot be re-read
  const bool escape = StreamIsTerminal(1);

  // Images wait here until the next message is sent (--image: the first).
  std::vector<std::string> images = o.images;
  // The rewind mark is at the start of the last kept turn (set before its
  // message was read, nothing read since): /undo and /retry rewind to it
  // instead of re-reading the conversation.
  bool mark_at_last_turn = false;
  uint64_t retries = 0;  // /retry's count: each samples with a seed of its own
  // Sends one message (`shown`: its images, read and measured already)
  // with `turn_seed` and shows the reply. kGoOn, or the exit status when
  // SIGTERM ends the program.
  constexpr int kGoOn = -1;
  auto send = [&](const std::string& line, std::vector<HeldImage> shown,
                  uint64_t turn_seed) -> int {
    const PromptPlan turn = BuildChatTurn(tmpl, MediaBlocksFor(shown), line);
    std::vector<int> ids;
    if (!TokenizeSegments(*engine, turn.segments, o, &ids)) return kGoOn;
    uint64_t message_tokens = ids.size();
    for (const HeldImage& h : shown) message_tokens += uint64_t(h.rows) - 1;  // a pad -> its rows

    // A full context: drop the oldest turns until the new one fits with
    // room for a reply (half the context, at most -n), then re-read.
    const uint64_t reply_room = std::min<uint64_t>(o.n_tokens, o.ctx / 2) + 1;
    const uint64_t held_now = stale ? history.Tokens() : uint64_t(engine->position());
    const bool full = held_now + message_tokens + reply_room > o.ctx;
    if (full || stale) {
      if (history.system_ids.size() + message_tokens + 1 > o.ctx) {
        std::fprintf(stderr, "waste: %s\n",
                     ContextTooSmall(history.system_ids.size() + message_tokens, o.ctx, 0).c_str());
        return kGoOn;
      }
      mark_at_last_turn = false;  // the state is read again
      const size_t drop_now =
          full ? history.DropOldestToFit(message_tokens + reply_room, o.ctx) : 0;
      if (const Status reread = history.ReRead(*engine); !reread.ok()) {
        stale = true;
        ReportFailure("context", reread, DetailOf(reread, *engine), o);
        std::fprintf(stderr,
                     "waste: that message was not kept; the next one re-reads the "
                     "conversation again (/reset starts over)\n");
        return kGoOn;
      }
      stale = false;
      if (full) {
        std::string what;
        if (!loaded_from.empty()) what = "the conversation loaded from " + loaded_from;
        if (drop_now > 0 || what.empty()) {
          what += (what.empty() ? "" : " and ") + std::string("the ") + std::to_string(drop_now) +
                  " oldest turn" + (drop_now == 1 ? "" : "s");
        }
        std::fprintf(stderr,
                     "waste: the context (--ctx %u) was full: dropped %s and re-read the rest; "
                     "/reset starts over\n",
                     o.ctx, what.c_str());
        loaded_from.clear();
      }
    }
    if (!AttachHeldImages(*engine, shown, /*announce=*/!o.quiet) ||
        !ExpandImagePads(*engine, &ids, "chat")) {
      engine->ClearImages();
      return kGoOn;
    }

    // What the session holds and what `history` records must stay the same
    // (a full context re-reads it): a message whose reply never began
    // (Ctrl-C during its prompt) or whose call failed is taken back whole.
    mark_at_last_turn = false;  // until this message's turn is kept
    if (const Status marked = engine->SetMark(); !marked.ok()) {
      ReportFailure("chat", marked, marked.message(), o);
      return kGoOn;
    }
    if (turn.echo_prompt) WriteOut(line);  // raw continuation shows what it continues
    ReasoningStyle style = TerminalReasoningStyle(
        tmpl, escape,
        [&](std::string_view bytes) {
          WriteOut(escape ? EscapeControls(bytes) : std::string(bytes));
        },
        [](std::string_view code) { WriteOut(std::string(code)); });
    PieceWriter stream(StopFor(o, turn), [&](std::string_view bytes) { style.Push(bytes); });
    GenParams params = ParamsFromOptions(o, turn_seed);
    // A cap of its own for each reply (--reasoning-budget).
    std::unique_ptr<ThinkTagBudget> reasoning_cap =
        cap_reasoning ? ReasoningCap(*engine, *tmpl, o, nullptr) : nullptr;
    if (reasoning_cap) params.constraint = reasoning_cap.get();
    // --draft may quote the earlier turns too (a file pasted in one message,
    // its edit asked for in the next), which this call does not feed again.
    std::vector<int> conversation;
    if (o.draft > 0) {
      conversation = history.system_ids;
      for (const ChatTurn& t : history.turns)
        conversation.insert(conversation.end(), t.ids.begin(), t.ids.end());
      params.draft_context = conversation;
    }
    GenerationTimer timer(!o.quiet && StderrIsTerminal());
    timer.Watch(&params);
    ClearInterrupt();
    const Stats before = engine->stats();
    TokenTally tally;
    std::vector<int> exchange = ids;
    const Result<FinishReason> finished = engine->Generate(ids, params, [&](const TokenEvent& e) {
      timer.Token();
      tally.Add(e);
      exchange.push_back(e.token);
      // The end-of-text token ends the reply; its spelling is not part of it.
      if (e.token == engine->info().eos_id && !o.ignore_eos) return !Interrupted();
      return stream.Push(e.piece) && !Interrupted();
    });
    stream.Finish();
    style.Finish();
    const Status status = !finished ? finished.error()
                          : *finished == FinishReason::kCancelled
                              ? Status(Errc::kCancelled, "cancelled by callback")
                              : Status::Ok();
    const Stats after = engine->stats();
    const bool replied = exchange.size() > ids.size();
    const bool failed = !status.ok() && status.code() != Errc::kCancelled;
    const bool taken_back = failed || (status.code() == Errc::kCancelled && !replied);
    const std::string failure_detail = failed ? DetailOf(status, *engine) : std::string();
    if (taken_back) {
      // Cannot fail after a mark that was set; said if it ever does.
      if (const Status back = engine->RewindToMark(); !back.ok()) {
        ReportFailure("chat", back, back.message(), o);
      }
      engine->ClearImages();  // a call stopped before its pads leaves them queued
      for (const HeldImage& h : shown) images.push_back(h.name);  // for the message sent again
    } else {
      history.turns.push_back({std::move(exchange), std::move(shown), line});
      mark_at_last_turn = true;
    }
    const std::string images_kept = !taken_back || images.empty() ? ""
                                    : images.size() == 1
                                        ? "; its image stays attached to the next message"
                                        : "; its " + std::to_string(images.size()) +
                                              " images stay attached to the next message";
    const RunTimings timings = timer.Finish(before, after, tally);
    counters.Add(timings, !taken_back);

    const bool cancelled = Interrupted();
    if (cancelled) {
      WriteOut(taken_back ? "\n(stopped before the reply: message not kept" + images_kept + ")"
                          : "\n(stopped)");
    } else if (failed) {
      WriteOut("\n");
      ReportFailure("generate", status, failure_detail, o);
      std::fprintf(stderr,
                   "waste: that message was not kept (the conversation is as before it)%s\n",
                   images_kept.c_str());
    } else if (status.ok() && !engine->error_detail().empty()) {
      std::fprintf(stderr,
                   "\nwaste: the context (--ctx %u) is full: the reply was cut; your next "
                   "message drops the oldest turns\n",
                   o.ctx);
    }
    WriteOut("\n");
    if (timings_on) std::fprintf(stderr, "%s\n", StatsLine(timings).c_str());
    if (cancelled && InterruptExitCode() == 143) return 143;  // SIGTERM ends the program
    ClearInterrupt();
    return kGoOn;
  };

  for (;;) {
    WriteOut("\n");
    SetExitOnInterrupt(true);
    std::optional<std::string> read = reader.Read();
    SetExitOnInterrupt(false);
    if (Interrupted()) return InterruptExitCode();
    if (!read) {
      WriteOut("\n");
      return 0;  // EOF (Ctrl-D)
    }
    std::string line = *read;
    if (line.empty()) continue;

    if (line[0] == '/' && line.rfind("//", 0) != 0) {
      auto [cmd, arg] = SplitCommand(line);
      if (cmd == "/exit" || cmd == "/quit" || cmd == "/bye") return 0;
      if (cmd == "/help") {
        SayHelp();
      } else if (cmd == "/reset") {
        images.clear();
        history.turns.clear();
        history.dropped = 0;
        loaded_from.clear();
        mark_at_last_turn = false;
        counters = SessionCounters{};
        stale = !history.ReRead(*engine).ok();  // the system prompt again
        Say("(conversation and statistics cleared)");
      } else if (cmd == "/stats") {
        PrintStats(*engine, o, counters, history.turns.size(), history.dropped, loaded_from);
      } else if (cmd == "/timings") {
        timings_on = !timings_on;
        Say(timings_on ? "(statistics after each reply: on)" : "(statistics after each reply: off)");
      } else if ((cmd == "/save" || cmd == "/load" || cmd == "/image") && arg.empty()) {
        Say("(" + cmd + " needs a FILE)");
      } else if (cmd == "/save") {
        Status s = engine->SaveState(arg);
        Say(s.ok() ? "(saved to " + arg + ")" : "(save failed: " + FileFailure(arg, s, false) + ")");
      } else if (cmd == "/load") {
        // A state names the container it was saved from; one from another
        // container of the same shape is refused unless forced (the user
        // may know that the weights match, e.g. a re-conversion).
        constexpr std::string_view kForce = "--force";
        const bool force = arg.rfind(kForce, 0) == 0 &&
                           (arg.size() == kForce.size() || arg[kForce.size()] == ' ');
        if (force) arg = SplitCommand(arg).second;
        if (arg.empty()) {
          Say("(/load --force needs a FILE)");
          continue;
        }
        Status s = engine->LoadState(arg, /*any_container=*/force);
        if (s.ok()) {
          history.turns.clear();  // the loaded state's turns are not ours to drop
          mark_at_last_turn = false;
          loaded_from = arg;
          stale = false;
          Say("(loaded " + arg + " — continuing that conversation)");
        } else {
          std::string why = FileFailure(arg, s, true);
          if (!force && why.find("another container") != std::string::npos) {
            why += " — `/load --force " + arg + "` loads it anyway";
          }
          Say("(load failed: " + why + ")");
        }
      } else if (cmd == "/undo" || cmd == "/retry") {
        // The last turn taken back: rewound to the mark before it when that
        // is where the mark is, else the rest re-read (a state /load gave
        // holds no text to re-read: only turns since can go, and only the
        // last by its mark). /retry then sends its message again.
        if (history.turns.empty()) {
          const std::string what = cmd == "/undo" ? "message to take back" : "reply to retry";
          Say(loaded_from.empty() ? "(no " + what + ")"
                                  : "(no " + what + " since /load " + loaded_from + ")");
          continue;
        }
        if (!mark_at_last_turn && !loaded_from.empty()) {
          Say("(cannot take back further: the conversation loaded from " + loaded_from +
              " holds no text to re-read)");
          continue;
        }
        ChatTurn last = std::move(history.turns.back());
        history.turns.pop_back();
        const bool rewound = mark_at_last_turn && !stale && engine->RewindToMark().ok();
        mark_at_last_turn = false;
        if (!rewound) {
          if (const Status reread = history.ReRead(*engine); !reread.ok()) {
            stale = true;
            ReportFailure("context", reread, DetailOf(reread, *engine), o);
            std::fprintf(stderr, "waste: the next message re-reads the conversation again "
                                 "(/reset starts over)\n");
            continue;
          }
          stale = false;
        }
        if (cmd == "/undo") {
          Say("(took back the last message and its reply)");
          continue;
        }
        ++retries;
        const uint64_t retry_seed = seed + retries * 0x9e3779b97f4a7c15ull;
        if (const int code = send(last.text, std::move(last.images), retry_seed); code != kGoOn) {
          return code;
        }
      } else if (cmd == "/image") {
        if (!engine->has_vision()) {
          // The plan knows, from manifest.json, whether there is a tower
          // that --image at start would have loaded.
          Result<MemPlan> plan = PlanMemory(o.model(), o.ctx);
          const bool tower = plan.has_value() && plan->vision_bytes > 0;
          Say("(" + arg + (tower ? ": images need the model opened with --image: restart chat "
                                   "with --image FILE)"
                                 : ": this container has no vision tower)"));
        } else if (images.size() >= static_cast<size_t>(kMaxQueuedImages)) {
          Say("(too many images)");
        } else {
          images.push_back(arg);
          Say("(" + arg + " attached to the next message)");
        }
      } else {
        std::vector<std::string> names;
        for (const ChatCommandDoc& c : kChatCommands) {
          if (std::string_view(c.name).find(' ') == std::string_view::npos) names.push_back(c.name);
        }
        for (const char* alias : {"/quit", "/bye"}) names.push_back(alias);
        std::string close = Closest(cmd, names);
        Say("(unknown command " + cmd + (close.empty() ? ";" : "; did you mean " + close + "?") +
            " /help lists them; start with // to send text beginning with /)");
      }
      continue;
    }
    if (line.rfind("//", 0) == 0) line.erase(0, 1);

    // Attached images are read and measured now (their rows count in the
    // length check) but encoded only after a re-read, which queues the kept
    // turns' own images. A failure drops them and the line.
    std::vector<HeldImage> shown;
    const bool held = HoldImages(*engine, images, &shown);
    images.clear();
    if (!held) continue;
    if (const int code = send(line, std::move(shown), seed); code != kGoOn) return code;
  }
}

}  // namespace waste::cli
