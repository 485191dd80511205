// plan: the memory floor and what a budget resolves to, from manifest.json
// alone (ENGINE.md §4). Exit 1 when --budget is below the floor, in both
// output forms (Open point 1 resolved as proposed).
#include <cstdio>

#include "commands.h"
#include "engine_setup.h"
#include "report.h"
#include "waste/waste.h"

namespace waste::cli {
namespace {

// The container's directory name, as the title shows it.
std::string BaseName(std::string path) {
  while (path.size() > 1 && (path.back() == '/' || path.back() == '\\')) path.pop_back();
  size_t slash = path.find_last_of("/\\");
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int PlanCommand(const Options& o) {
  if (!CheckContainerPath(o)) return 1;
  // The plan exactly as opening the model with these settings makes it.
  Config config;
  config.ctx_tokens = o.ctx;
  config.max_sessions = o.plan_sessions;
  config.rewind_marks = o.plan_marks;
  config.draft_tokens = o.draft;
  config.vision = o.plan_vision;
  Result<MemPlan> plan = PlanMemoryForOpen(o.model(), config);
  if (!plan.has_value()) {
    ReportFailure("plan", plan.error(), plan.error().message(), o);
    return 1;
  }
  PlanBudget budget;
  // --budget 0 means "engine chooses", same as leaving it out.
  budget.given = o.budget_given && o.budget_bytes > 0;
  budget.budget = budget.given ? o.budget_bytes : 0;
  Result<BudgetResolution> resolved = ResolveBudget(*plan, budget.budget);
  if (resolved.has_value()) {
    budget.budget = resolved->budget_bytes;
    budget.expert_cache = resolved->expert_cache_bytes;
  } else if (resolved.error().code() == Errc::kRamBudget && budget.given) {
    budget.below_floor = true;
  } else {
    ReportFailure("plan", resolved.error(), resolved.error().message(), o);
    return 1;
  }
  if (o.json) {
    std::printf("%s\n", DumpJson(PlanJson(*plan, budget)).c_str());
  } else {
    std::fputs(PlanText(BaseName(o.model()), *plan, budget).c_str(), stdout);
  }
  return budget.below_floor ? 1 : 0;
}

}  // namespace waste::cli
