// The memory plan, computed from manifest.json alone (no weights read):
// floor, recommendation, and what a budget resolves to (ENGINE.md §4).
#pragma once

#include <cstdint>
#include <string>

#include "waste/config.h"
#include "waste/export.h"
#include "waste/status.h"

namespace waste {

struct MemPlan {
  uint32_t ctx = 0;
  uint64_t trunk_bytes = 0;          // resident trunk (quantized embedding excluded)
  uint32_t sessions = 1;             // sessions the plan keeps room for
  uint64_t session_bytes = 0;        // one session: its state + scratch at ctx
  uint32_t snapshots = 0;            // in-RAM snapshots the plan keeps room for
  uint64_t snapshot_bytes = 0;       // their room (snapshots x one state), in state_bytes
  // state and scratch count every planned session (sessions x one session);
  // state also counts the snapshots' room and any rewind marks.
  uint64_t state_bytes = 0;          // KDA state + conv rings + MLA latent KV at ctx
  // One rewind mark (Session::SetMark): the KDA state and conv rings, not
  // the KV cache. Always reported; in session_bytes, state_bytes and the
  // floor only when marks_included (Config::rewind_marks), then
  // marks_per_session of them for every session.
  uint64_t mark_bytes = 0;
  bool marks_included = false;
  uint32_t marks_per_session = 0;
  // Drafting (Config::draft_tokens): what a pass keeps per token (its
  // logits row, and the KDA layers' inputs so that a refused guess costs no
  // second pass), always reported; draft_record_bytes is that for one session at the configured
  // draft length, in session_bytes, scratch_bytes and the floor (0 without
  // drafting). Drafting's rewind mark is one of marks_per_session.
  uint64_t draft_bytes_per_token = 0;
  uint64_t draft_record_bytes = 0;
  uint64_t scratch_bytes = 0;        // every buffer the engine allocates besides those
  uint64_t min_expert_cache = 0;     // record * top_k * 2
  uint64_t floor_bytes = 0;
  uint64_t working_set_bytes = 0;    // record * top_k * n_layers
  uint64_t recommended_bytes = 0;
  uint64_t record_bytes = 0;         // largest expert record
  uint64_t all_experts_bytes = 0;    // every expert record of the container
  uint64_t vision_bytes = 0;         // what opening with vision adds (0: no tower)
  bool vision_included = false;      // vision_bytes is in scratch, floor and recommended
  uint64_t physical_ram_bytes = 0;
  uint64_t usable_ram_bytes = 0;
  std::string usable_ram_source;
};

// `sessions` (0 is taken as 1) sessions of `ctx_tokens` each.
WASTE_EXPORT Result<MemPlan> PlanMemory(const std::string& container_dir, uint32_t ctx_tokens,
                           uint32_t sessions = 1) noexcept;

// The plan exactly as Model::Open(container_dir, config) makes it (Open
// uses this): Config::max_sessions sessions of ctx_tokens; room for
// max_snapshots snapshots in state; with vision on a container that has a
// tower, the tower's bytes added to scratch, floor and recommendation
// (vision_included); with rewind_marks, that many marks per session added to
// state (marks_included). `waste plan` and `waste serve --plan` print this.
// Only those five fields of `config` matter.
WASTE_EXPORT Result<MemPlan> PlanMemoryForOpen(const std::string& container_dir,
                                               const Config& config) noexcept;
// The same for `sessions` sessions, no snapshots and no marks.
WASTE_EXPORT Result<MemPlan> PlanMemoryForOpen(const std::string& container_dir,
                                               uint32_t ctx_tokens, uint32_t sessions,
                                               bool vision) noexcept;

struct BudgetResolution {
  uint64_t budget_bytes = 0;
  uint64_t expert_cache_bytes = 0;   // budget - floor + min_expert_cache, whole slots
  uint64_t slots = 0;
  bool defaulted = false;            // chosen by the default rule
  bool over_cap = false;             // leaves under 25% of usable RAM
};

// requested 0 = default rule. kRamBudget (message states the floor) when
// requested is below the floor.
WASTE_EXPORT Result<BudgetResolution> ResolveBudget(const MemPlan& plan, uint64_t requested_bytes) noexcept;

}  // namespace waste
