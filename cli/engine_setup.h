// Opening the engine from the command line and reporting its failures in
// the shapes of ENGINE.md §1.8. Shared by every command that opens a model.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "options.h"
#include "prompt_plan.h"
#include "waste/chat.h"
#include "waste/waste.h"

namespace waste::cli {

Config ConfigFromOptions(const Options& options);

// MODEL names a directory holding manifest.json; else prints why not
// ("not a waste container: PATH (no manifest.json)", "PATH is a file; ...").
bool CheckContainerPath(const Options& options);

// "DIR has no tokenizer (...)" and what to do instead: --ids where the
// command takes ids, else that the command needs text.
std::string NoTokenizer(const Options& options);

// Opens MODEL. On failure prints the messages and returns nullptr (exit 1).
// Prints the over-budget warning (§4.3) unless -q.
std::unique_ptr<Engine> OpenEngine(const Options& options);

// "<what>: <strerror>" plus the lines §1.8 adds for the code and `detail`.
void ReportFailure(const std::string& what, const Status& status, const std::string& detail,
                   const Options& options);
// The detail of a failed engine call: the Status message, else the
// engine's error_detail().
std::string DetailOf(const Status& status, const Engine& engine);

// run/chat notes after a successful open: the page-cache note, and for run
// the "no --budget" line (`budget_note`). Nothing under -q.
void PrintOpenNotes(const Engine& engine, const Options& options, bool budget_note);

// Engine::TokenizeSegments (each segment in its own mode, ids
// concatenated). On failure prints "tokenize: ..." and returns false.
bool TokenizeSegments(const Engine& engine, std::span<const PromptSegment> segments,
                      const Options& options, std::vector<int>* ids);

// MODEL/chat.json for run and chat: nullopt with --raw, when there is none,
// or when it cannot be used (then a note on stderr unless `quiet`, and the
// command continues untemplated).
std::optional<ChatTemplate> LoadTemplate(const Options& options, const Engine& engine, bool quiet);

// --reasoning-budget: whether it applies (given, and the chat format has
// <think> tags; a note on stderr, unless quiet, when it has none), and the
// cap itself for one reply (waste::ThinkTagBudget), chained with the
// generation's other constraint `inner`.
bool ReasoningCapApplies(const ChatTemplate* tmpl, const Options& options);
std::unique_ptr<ThinkTagBudget> ReasoningCap(const Engine& engine, const ChatTemplate& tmpl,
                                             const Options& options, TokenConstraint* inner);

// The stop strings in force: every --stop when given, else the plan's
// default (none when that is empty).
std::vector<std::string> StopFor(const Options& options, const PromptPlan& plan);

// {"error": {"code": CODE, "message": MESSAGE}} on stdout (--json failures).
void PrintJsonError(const std::string& code, const std::string& message);

// Usage error of a command after parsing (no prompt, bad ids): prints the
// message and the usage hint; returns 2.
int UsageFailure(const Options& options, const std::string& message);
// Any other failure of the command (exit 1): `message` on stderr, or with
// --json the {"error": {"code": CODE, ...}} object on stdout.
int Failure(const Options& options, const std::string& code, const std::string& message);

// "the prompt is N tokens but the context holds M ...: raise --ctx".
std::string ContextTooSmall(uint64_t prompt_tokens, uint32_t ctx, int position);

// Writes bytes to stdout unbuffered-enough for streaming.
void WriteOut(std::string_view bytes);

}  // namespace waste::cli
