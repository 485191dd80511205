// The memory plan from manifest.json alone (ENGINE.md §4): floor,
// recommendation, and what a budget resolves to.
#include <fmt/format.h>

#include <algorithm>
#include <exception>

#include "base/exception_status.h"
#include "container/container.h"
#include "container/tensor_list.h"
#include "engine/memplan_internal.h"
#include "model/attention_mla.h"
#include "model/kda.h"
#include "model/vq_experts.h"
#include "platform/platform.h"
#include "vision/vision_plan.h"
#include "waste/config.h"
#include "waste/files.h"
#include "waste/memplan.h"

namespace waste {
namespace {

constexpr uint64_t kF32 = sizeof(float);

std::string Size(uint64_t bytes) {
  constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
  if (bytes >= (uint64_t{1} << 30)) return fmt::format("{:.2f} GiB", bytes / kGiB);
  return fmt::format("{:.0f} MiB", bytes / (1024.0 * 1024.0));
}

}  // namespace

// The KDA recurrent state and conv rings alone: what a rewind mark copies.
static uint64_t RecurrentStateBytes(const ModelConfig& c) {
  const uint64_t n_kda = static_cast<uint64_t>(c.n_kda_layers());
  const uint64_t hk = static_cast<uint64_t>(c.kda.heads), dk = static_cast<uint64_t>(c.kda.head_dim);
  const uint64_t taps = c.kda.conv_k > 0 ? static_cast<uint64_t>(c.kda.conv_k - 1) : 0;
  return n_kda * hk * dk * dk * kF32            // recurrent state, one D x D per head
         + n_kda * 3 * taps * hk * dk * kF32;   // q/k/v conv rings
}

uint64_t StateBytes(const ModelConfig& c, uint32_t ctx) {
  const uint64_t n_mla = static_cast<uint64_t>(c.n_mla_layers());
  uint64_t mla = n_mla * ctx * static_cast<uint64_t>(c.mla.kv_lora_rank + c.mla.qk_rope) * kF32;
  return RecurrentStateBytes(c) + mla;
}

uint64_t EstimateScratchBytes(const ModelConfig& c, uint32_t ctx) {
  // Per-token buffers are sized for a chunk (attention, the dense and
  // shared matmuls) or for a span (the residual stream and the routed
  // experts' inputs and outputs, model/forward.h).
  const uint64_t t = kPrefillChunkTokens;
  const uint64_t s = kPrefillSpanTokens;
  const uint64_t h = static_cast<uint64_t>(c.hidden);
  const uint64_t v = static_cast<uint64_t>(c.vocab);
  const uint64_t x = static_cast<uint64_t>(c.expert_in());
  const uint64_t im = static_cast<uint64_t>(c.moe.inter);
  const uint64_t e = static_cast<uint64_t>(c.moe.n_experts);
  const uint64_t k = static_cast<uint64_t>(c.moe.top_k);
  const uint64_t heads = static_cast<uint64_t>(c.mla.n_heads);
  const uint64_t ck = static_cast<uint64_t>(c.kda_channels());
  const uint64_t dk = static_cast<uint64_t>(c.kda.head_dim);
  const uint64_t hk = static_cast<uint64_t>(c.kda.heads);
  const uint64_t rkv = static_cast<uint64_t>(c.mla.kv_lora_rank);
  const uint64_t rq = static_cast<uint64_t>(c.mla.q_lora_rank);
  const uint64_t dr = static_cast<uint64_t>(c.mla.qk_rope);
  const uint64_t dq = static_cast<uint64_t>(c.qk_head_dim());
  const uint64_t dv = static_cast<uint64_t>(c.mla.v_head);
  const uint64_t ffn = std::max<uint64_t>(static_cast<uint64_t>(c.dense_inter),
                                          static_cast<uint64_t>(c.shared_inter()));
  uint64_t floats = 0;

  // Residual stream of a span: mixture, normed input, sub-layer output,
  // AttnRes partial sum; plus the last position's hidden state.
  floats += (4 * s + 1) * h;
  // AttnRes block history for every span token ((n_blocks + 4) x hidden).
  if (c.attn_res.enabled()) {
    uint64_t blocks = (static_cast<uint64_t>(c.n_layers) + c.attn_res.block - 1) /
                          static_cast<uint64_t>(c.attn_res.block) + 1;
    floats += s * (blocks + 4) * h + blocks + 1;
  }
  // Logits, and the sampler's probabilities and sort keys.
  floats += 3 * v;
  // KDA per chunk token: pre-conv and post-conv q/k/v, decay and output
  // gates, output, the two rank-Dk bottlenecks and the per-head beta.
  if (c.n_kda_layers() > 0) floats += t * (9 * ck + 2 * dk + hk);
  // MLA per chunk token: query (and its LoRA bottleneck), latent KV row,
  // absorbed query, per-head latent output, values and gate; plus one
  // token's per-head scores over the whole context and absorption scratch.
  if (c.n_mla_layers() > 0) {
    floats += t * (heads * dq + rq + rkv + dr + 2 * heads * dv);
    floats += heads * (3 * rkv + ctx);
    // The chunk's attention products (attention_mla_chunk.cc): absorbed
    // queries, block scores, latent sums of a head group; one block transposed.
    floats += MlaLayer::ChunkScratchFloats(c, t);
  }
  // Dense FFN / shared expert activations (gate and up, per chunk) and the
  // shared experts' output (per span).
  floats += t * 2 * ffn + s * h;
  if (e > 0) {
    const uint64_t per_v = static_cast<uint64_t>(c.quant.stages) * c.quant.entries;
    const uint64_t table_in = x / c.quant.vec_dim * per_v;   // one input vector's LUT
    const uint64_t table_mid = im / c.quant.vec_dim * per_v; // one expert's down-input LUT
    // Router logits, scores and top-k per span token.
    floats += s * (2 * e + 2 * k);
    // Routed experts: gate/up/down activations for top_k experts, latent
    // inputs and outputs of the span, and one output row; every (token,
    // choice) pair's output before the weighted sum (MoeLayer::outs_), and
    // its token and slot (32-bit, twice: the pairs and their reordering).
    floats += k * (2 * im + x) + 2 * s * x + std::max(x, h);
    floats += s * k * x + 4 * s * k;
    // LUTs: gate and up tables for a window of chunk tokens (decode uses the
    // first of them; model/moe.h) and the down tables of the experts being
    // applied.
    const uint64_t tt = std::min<uint64_t>(t, VqExperts::kTableTokens);
    const uint64_t tables = (2 * tt + 1) * table_in + 2 * table_mid;
    floats += tables;
    // VQ4P sums int8-quantised tables: one byte per entry plus one scale per
    // 32 vector positions.
    if (c.quant.index_bits == 6) {
      floats += (tables + 3) / 4 + (2 * tt + 2) * (x / c.quant.vec_dim / 32 + 1);
    }
    // Expert staging: one expert dequantised (3 x moe_inter x width).
    floats += 3 * im * x;
  }
  // Small fixed buffers (norm scratch, rotary tables, per-call bookkeeping).
  constexpr uint64_t kFixed = uint64_t{1} << 20;
  return floats * kF32 + kFixed;
}

Result<MemPlan> PlanMemory(const std::string& container_dir, uint32_t ctx_tokens,
                           uint32_t sessions) noexcept {
  try {
    std::string path = container_dir.empty() || container_dir.back() == '/'
                           ? container_dir + "manifest.json"
                           : container_dir + "/manifest.json";
    Result<std::string> text = platform::ReadRegularFile(path, kMaxManifestBytes, "manifest");
    if (!text) return text.error();
    // The same manifest validation as open (W): plan refuses what open refuses.
    WASTE_ASSIGN_OR_RETURN(Manifest m, ParseManifest(*text, path));
    WASTE_TRY(ValidateRequiredTensors(m));
    const ModelConfig& c = m.config;

    MemPlan p;
    p.ctx = ctx_tokens;
    p.trunk_bytes = ResidentTrunkBytes(m);
    p.sessions = std::max<uint32_t>(1, sessions);
    const uint64_t state = StateBytes(c, ctx_tokens);
    const uint64_t scratch = EstimateScratchBytes(c, ctx_tokens);
    p.session_bytes = state + scratch;
    p.mark_bytes = RecurrentStateBytes(c);
    // A drafting pass keeps each position's logits and its KDA layers' inputs.
    p.draft_bytes_per_token = static_cast<uint64_t>(c.vocab) * sizeof(float);
    for (AttnKind kind : c.attn_kind) {
      if (kind == AttnKind::kKda) p.draft_bytes_per_token += KdaPassRecord::BytesPerToken(c);
    }
    p.state_bytes = state * p.sessions;
    p.scratch_bytes = scratch * p.sessions;
    uint64_t bank_bytes = 0;  // the largest layer's bank
    for (const BankInfo& b : m.banks) {
      if (b.layer < 0) continue;
      p.record_bytes = std::max(p.record_bytes, b.record_bytes);
      bank_bytes = std::max(bank_bytes, b.bytes);
      p.all_experts_bytes += b.bytes;
    }
    const uint64_t k = static_cast<uint64_t>(c.moe.top_k);
    const uint64_t layers = static_cast<uint64_t>(c.n_layers);
    p.min_expert_cache = p.record_bytes * k * 2;
    p.floor_bytes = p.trunk_bytes + p.state_bytes + p.scratch_bytes + p.min_expert_cache;
    // R counts every layer, dense ones included (ENGINE.md §4.1).
    p.working_set_bytes = p.record_bytes * k * layers;
    p.recommended_bytes = p.floor_bytes + std::min(3 * p.working_set_bytes, bank_bytes * layers);
    // Reported always; added to the floor only by a context opened with vision.
    p.vision_bytes = vision::ContainerVisionBytes(container_dir, m);
    p.physical_ram_bytes = platform::PhysicalRam();
    platform::UsableRam usable = platform::GetUsableRam();
    p.usable_ram_bytes = usable.bytes;
    p.usable_ram_source = usable.source;
    return p;
  } catch (const std::exception& e) {
    return StatusFromException(e, Errc::kFormat, fmt::format("{}: cannot plan memory: {}", container_dir, e.what()));
  }
}

Result<MemPlan> PlanMemoryForOpen(const std::string& container_dir, uint32_t ctx_tokens,
                                  uint32_t sessions, bool vision) noexcept {
  Config config;
  config.ctx_tokens = ctx_tokens;
  config.max_sessions = sessions;
  config.vision = vision;
  return PlanMemoryForOpen(container_dir, config);
}

Result<MemPlan> PlanMemoryForOpen(const std::string& container_dir, const Config& config) noexcept {
  Result<MemPlan> plan = PlanMemory(container_dir, config.ctx_tokens, config.max_sessions);
  if (!plan) return plan;
  if (config.max_snapshots > 0) {
    // A snapshot holds at most one session's state (snapshot.cc: the KDA
    // state, the rings and the latent rows in use); no scratch.
    const uint64_t one_state = plan->state_bytes / plan->sessions;
    plan->snapshots = config.max_snapshots;
    plan->snapshot_bytes = one_state * config.max_snapshots;
    plan->state_bytes += plan->snapshot_bytes;
    plan->floor_bytes += plan->snapshot_bytes;
    plan->recommended_bytes += plan->snapshot_bytes;
  }
  // Drafting keeps one more: the state before a verifying pass.
  const int mark_count = std::max(0, config.rewind_marks) + (config.draft_tokens > 0 ? 1 : 0);
  if (mark_count > 0) {
    plan->marks_per_session = static_cast<uint32_t>(mark_count);
    const uint64_t per_session = plan->mark_bytes * plan->marks_per_session;
    const uint64_t marks = per_session * plan->sessions;
    plan->session_bytes += per_session;
    plan->state_bytes += marks;
    plan->floor_bytes += marks;
    plan->recommended_bytes += marks;
    plan->marks_included = true;
  }
  if (config.draft_tokens > 0) {
    // A pass feeds the token it starts from and the guesses.
    const uint64_t record =
        plan->draft_bytes_per_token * (static_cast<uint64_t>(config.draft_tokens) + 1);
    plan->draft_record_bytes = record;
    plan->session_bytes += record;
    plan->scratch_bytes += record * plan->sessions;
    plan->floor_bytes += record * plan->sessions;
    plan->recommended_bytes += record * plan->sessions;
  }
  // Vision memory is taken from the budget like any scratch (docs/VISION.md).
  if (config.vision && plan->vision_bytes > 0) {
    plan->scratch_bytes += plan->vision_bytes;
    plan->floor_bytes += plan->vision_bytes;
    plan->recommended_bytes += plan->vision_bytes;
    plan->vision_included = true;
  }
  return plan;
}

static Result<BudgetResolution> ResolveBudgetOrThrow(const MemPlan& plan, uint64_t requested_bytes) {
  BudgetResolution r;
  const uint64_t floor = plan.floor_bytes;
  const uint64_t usable = plan.usable_ram_bytes;
  const uint64_t cap = usable - usable / 4;  // 25% left to the OS (ENGINE.md §4.3)
  if (requested_bytes == 0) {
    r.defaulted = true;
    // No default can work when the floor alone exceeds the machine: say so
    // instead of letting the allocations fail (ENGINE.md §4.3).
    if (usable > 0 && floor > usable) {
      return Status(Errc::kRamBudget,
                    fmt::format("the model's floor of {} at a context of {} tokens exceeds the {} "
                                "of RAM this process may use ({}); lower the context or raise "
                                "the limit",
                                Size(floor), plan.ctx, Size(usable),
                                plan.usable_ram_source.empty() ? "physical"
                                                               : plan.usable_ram_source));
    }
    // A cache larger than every expert cannot help: the recommendation
    // already caps 3 working sets there, and so do the smaller steps.
    const uint64_t useful = plan.recommended_bytes - floor;
    r.budget_bytes = plan.recommended_bytes;
    if (usable > 0) {
      r.budget_bytes = floor;
      for (uint64_t step : {3, 2, 1}) {
        uint64_t candidate = floor + std::min(step * plan.working_set_bytes, useful);
        if (candidate <= cap) {
          r.budget_bytes = candidate;
          break;
        }
      }
    }
  } else {
    if (requested_bytes < floor) {
      // Rounded sizes can print equal ("149 MB below 149 MB"): then the
      // exact byte counts say what is short.
      std::string have = Size(requested_bytes), need = Size(floor);
      if (have == need) {
        have = fmt::format("{} bytes", requested_bytes);
        need = fmt::format("{} bytes", floor);
      }
      return Status(Errc::kRamBudget,
                    fmt::format("budget {} is below the model's floor of {} (trunk {}, state {}, "
                                "scratch {}, minimum expert cache {})",
                                have, need, Size(plan.trunk_bytes),
                                Size(plan.state_bytes), Size(plan.scratch_bytes),
                                Size(plan.min_expert_cache)));
    }
    r.budget_bytes = requested_bytes;
  }
  const uint64_t cache = r.budget_bytes - floor + plan.min_expert_cache;
  r.slots = plan.record_bytes > 0 ? cache / plan.record_bytes : 0;
  r.expert_cache_bytes = r.slots * plan.record_bytes;
  r.over_cap = usable > 0 && r.budget_bytes > cap;
  return r;
}

Result<BudgetResolution> ResolveBudget(const MemPlan& plan, uint64_t requested_bytes) noexcept {
  try {
    return ResolveBudgetOrThrow(plan, requested_bytes);
  } catch (const std::exception& e) {
    return OomError(e.what());
  }
}

}  // namespace waste
