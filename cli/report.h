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

std::string FormatGb(uint64_t bytes);    // "%.2f GB", binary
std::string FormatSize(uint64_t bytes);  // "%.2f GB" from 1 GiB up, else "%.0f MB"
// Hit percentage rounded to an integer; 0 when there were no lookups.
int HitPercent(uint64_t hit, uint64_t miss);

// "[16 tokens, 26.87 s, 0.60 tok/s | experts 9000 hit / 14552 miss = 38%]"
std::string StatsLine(uint64_t tokens, double seconds, uint64_t hit, uint64_t miss);

// "waste: no --budget, using X GB of Y GB (expert cache Z GB)"; `usable` 0
// drops the "of Y" part.
std::string BudgetNote(const MemoryUsage& used, uint64_t usable);
// Two lines when the budget leaves under 25% of usable RAM (ENGINE.md
// §4.3 step 4); empty otherwise or when usable RAM is unknown.
std::string OverCapWarning(uint64_t budget, uint64_t usable);

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
// "  %6d  %8.4f  %7.4f  %s"
std::string EvalRow(int id, float logit, double prob, std::string_view piece);

// The note printed when expert reads go through the page cache.
extern const char kPageCacheNote[];

}  // namespace waste::cli
