// Text the commands print: sizes, the stats line, the plan and info
// reports, eval rows, JSON. Pure functions of their inputs, so the exact
// shapes of ENGINE.md §1.6/§1.7 are unit-tested without an engine.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "waste/engine.h"
#include "waste/memplan.h"

namespace waste::cli {

// Keys stay in insertion order, as the reference prints them.
using Json = nlohmann::ordered_json;

// One line, invalid UTF-8 replaced (pieces can be partial characters).
std::string DumpJson(const Json& j);

std::string FormatGb(uint64_t bytes);    // "%.2f GiB"
std::string FormatSize(uint64_t bytes);  // "%.2f GiB" from 1 GiB up, else "%.0f MiB"
// Hit percentage rounded to an integer; 0 when there were no lookups.
int HitPercent(uint64_t hit, uint64_t miss);

// What one run (or one chat reply) cost, from its start to its last token.
struct RunTimings {
  double load_s = -1;          // opening the model; < 0 = not part of this report
  uint64_t prompt_tokens = 0;
  double prompt_s = 0;         // prefill
  double first_token_s = 0;    // Generate called -> first token in hand
  uint64_t tokens = 0;         // generated
  double gen_s = 0;            // sum of per-token steps
  uint64_t hit = 0, miss = 0;  // expert lookups, prefill and decode
  uint64_t bytes_read = 0;
  uint64_t drafted = 0, draft_kept = 0;  // --draft: guesses checked, guesses kept
};

// "[16 tokens, 26.87 s, 0.60 tok/s | experts 9000 hit / 14552 miss = 38%]"
std::string StatsLine(uint64_t tokens, double seconds, uint64_t hit, uint64_t miss);
// "[load 0.52 s | prompt 34 tokens, 5.10 s, 6.67 tok/s | first token 5.31 s |
//  8 tokens, 1.41 s, 5.67 tok/s | experts 9000 hit / 14552 miss = 38%,
//  2.31 GiB read]" on one line (load only when load_s >= 0; with --draft,
//  "| drafts 40 of 52 kept" before the closing bracket).
std::string StatsLine(const RunTimings& t);
// The same figures as JSON keys (added to run's object).
void AddTimings(const RunTimings& t, Json* j);
// "prompt 128/2291 tokens (5%), 45.1 tok/s, ETA 48 s"
std::string ProgressLine(uint64_t done, uint64_t total, double elapsed_s,
                         const char* what = "prompt");

// "waste: no --budget, using X GB of Y GB (expert cache Z GB)"; `usable` 0
// drops the "of Y" part.
std::string BudgetNote(const MemoryUsage& used, uint64_t usable);
// Two lines when what the engine really allocated leaves under 25% of
// usable RAM; empty otherwise or when usable RAM is unknown. `model` is
// the path the user gave.
std::string OverCapWarning(uint64_t allocated, uint64_t usable, const std::string& model);
// A hint when the expert cache cannot hold one token's working set (every
// layer's top-k experts): each token then re-reads its experts from disk.
std::string SmallCacheHint(uint64_t expert_cache, uint64_t working_set, const std::string& model);

// What `plan` says about a budget.
struct PlanBudget {
  bool given = false;  // --budget was on the command line
  uint64_t budget = 0;
  bool below_floor = false;
  uint64_t expert_cache = 0;
};
// `name` is the container's directory name.
std::string PlanText(const std::string& name, const MemPlan& plan, const PlanBudget& budget);
Json PlanJson(const MemPlan& plan, const PlanBudget& budget);

// "%.2f T" from 1e12 up, else "%.2f B" (decimal).
std::string FormatParams(uint64_t params);
std::string InfoText(const std::string& build_line, const ModelInfo& info, const MemoryUsage& used,
                     const std::string& backend, int threads, bool direct_io);
Json InfoJson(const std::string& engine_version, const ModelInfo& info, const MemoryUsage& used,
              const std::string& backend, int threads, bool direct_io);

// A piece made printable: valid UTF-8 as is, control characters escaped,
// any other byte as "<byte 0xC7>".
std::string DisplayPiece(std::string_view bytes);
// Model text for a terminal: control characters other than newline and
// tab shown as \x1b, \r, ... so they cannot move the cursor or recolour
// the screen; everything else as is.
std::string EscapeControls(std::string_view bytes);
// "  %6d  %8.4f  %7.4f  %s"
std::string EvalRow(int id, float logit, double prob, std::string_view piece);

// The note printed when expert reads go through the page cache.
extern const char kPageCacheNote[];

}  // namespace waste::cli
