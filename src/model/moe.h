// Mixture-of-experts block: the router (model/moe_router.h: sigmoid or
// softmax scores, a selection-only correction bias, global or group-limited
// top-k, renormalisation and routed_scaling_factor); routed experts applied
// through lookup tables built from the input (never dequantised); optional
// latent projection and norm (latent MoE); shared experts on the full input.
//
// Parallel shape (docs/PERFORMANCE.md): the routed experts of a step are
// independent work units run on the thread pool (one fork-join per window
// of experts, not one per matrix); a unit applies one expert to up to four
// tokens of the chunk that chose it (the indices are read once for them),
// writes per-(token, expert) outputs, and the outputs are summed afterwards
// in the spec's order (selection order in decode, ascending expert id in a
// chunk) with the one expression form. Experts already in memory run
// first, so their compute covers the reads still in flight.
// Every row of every output is computed by the same kernels whatever the
// thread count, so results are bit-identical at any thread count.
#pragma once

#include <cstdint>
#include <vector>

#include "streaming/expert_cache.h"
#include "model/ffn.h"
#include "model/layer_weights.h"
#include "model/model_config.h"
#include "runtime/ops.h"

namespace waste {

struct Routing {
  std::vector<int> ids;        // selection order
  std::vector<float> weights;  // final weights (renormalised, scaled)
};

// Router lookahead target (see MoeLayer::Forward). Outside the class: GCC
// rejects a nested struct's default member initialisers in a default
// argument of the enclosing class.
struct MoeLookahead {
  int layer = -1;
  const MoeWeights* weights = nullptr;
  int count = 0;
};

class MoeLayer {
 public:
  MoeLayer(const Container& container, size_t max_tokens);

  // Decode: out[hidden] for one token; experts summed in selection order.
  // `next` (may be null) is the next MoE layer: its router predicts that
  // layer's experts from this layer's input (router lookahead, ENGINE.md
  // §5.5) and `lookahead` of them are prefetched. Timing only.
  using Lookahead = MoeLookahead;
  Status Forward(const Ops& ops, const MoeWeights& w, int layer, ExpertCache& cache,
                 const float* x, float* out, Routing* routing, const Lookahead& next = {});
  // Chunk: each distinct expert acquired once, in ascending id, applied to
  // every token that chose it; sums in ascending expert id. x, out: [tokens][hidden].
  Status ForwardChunk(const Ops& ops, const MoeWeights& w, int layer, ExpertCache& cache,
                      const float* x, size_t tokens, float* out);

  void Route(const Ops& ops, const MoeWeights& w, const float* x, Routing* r);
  // Top `count` experts of `w`'s router by biased score (selection order).
  void Predict(const Ops& ops, const MoeWeights& w, const float* x, int count,
               std::vector<int>* ids);
  uint64_t scratch_bytes() const;

 private:
  // One expert applied to the tokens that chose it: pairs [first, first+n)
  // of pair_token_/pair_out_.
  struct Item {
    ExpertRecordView view;
    int expert = -1;
    size_t first = 0, n = 0;
  };
  // Per-thread scratch for items (kGroup tokens at a time).
  struct Scratch {
    std::vector<float> g, u, table_mid, tau_mid;
    std::vector<int8_t> q_mid;
  };

  // Per-thread scratch for the pool of `ops` (first use) and the table layout.
  void PrepareScratch(const Ops& ops);
  // Routes one token; logits/scores: [n_experts] each, group_scratch:
  // RouterScratchFloats (model/moe_router.h). Scratch is the caller's so
  // tokens can be routed in parallel.
  void RouteWith(const Ops& ops, const MoeWeights& w, const float* x, Routing* r, float* logits,
                 float* scores, float* group_scratch);
  // The gate and up tables of tokens [t0, t1) (x rows at stride x_stride).
  void BuildInputTables(const Ops& ops, const float* x, size_t x_stride, size_t tokens,
                        int book_base);
  // Serial (runs inside a parallel region): tokens [g0, g0 + kGroup) of one item.
  void RunItem(const kernels::KernelTable& k, const Item& item, size_t g0, Scratch& s);
  // One 8-bit-index matrix applied to n <= kGroup inputs, each with its own
  // table (f32, or byte planes when the kernel table prefers them).
  void Apply8(const kernels::KernelTable& k, const uint8_t* indices, const uint16_t* scales,
              size_t nv, const float* const* tables, size_t n, float* const* ys,
              size_t rows) const;
  void BuildTableSerial(const kernels::KernelTable& k, const float* x, size_t n, int book_base,
                        float* table, int8_t* qtable, float* tau, size_t v_begin, size_t v_end);
  // Pins items_[b, e) in order, runs them in parallel, releases them.
  Status RunItems(const Ops& ops, ExpertCache& cache, int layer, size_t b, size_t e);
  // Runs every item of the step: those already in memory first (their
  // compute covers the reads still in flight), then the rest in windows of
  // `late_window` as they land. Outputs go to per-pair slots and are summed
  // afterwards in the fixed order, so the order changes timing only.
  Status RunAllItems(const Ops& ops, ExpertCache& cache, int layer, size_t late_window);
  float* TableIn(size_t token, int which) { return tables_.data() + (2 * token + which) * table_in_; }
  int8_t* QTableIn(size_t token, int which) {
    return six_bit_ ? qtables_.data() + (2 * token + which) * table_in_ : nullptr;
  }
  float* TauIn(size_t token, int which) {
    return six_bit_ ? taus_.data() + (2 * token + which) * tau_in_ : nullptr;
  }

  const Container& container_;
  const ModelConfig& cfg_;
  size_t max_tokens_;
  bool six_bit_;
  bool planes_ = false;  // VQ3R/VQ2R tables in byte planes (kernel table's vq8_planes)
  size_t nv_in_, nv_mid_, table_in_, table_mid_, tau_in_, tau_mid_;
  Mlp shared_;
  std::vector<float> logits_, scores_, xe_, y_, d_, shared_out_;
  std::vector<float> tables_;        // [max_tokens][gate, up] input tables (f32 or planes)
  std::vector<int8_t> qtables_;      // int8 shadows (VQ4P)
  std::vector<float> taus_;
  std::vector<float> outs_;          // [max_tokens * top_k][expert_in] per-pair outputs
  std::vector<Scratch> scratch_;     // per pool thread, sized on first use
  std::vector<float> group_scratch_;  // the router's group scores (decode, lookahead)
  std::vector<float> route_scratch_;  // [max_tokens][route_stride_] chunk routing
  size_t route_stride_ = 0;           // 2 * n_experts + the router's group scratch
  std::vector<Routing> chunk_routes_;
  std::vector<int> predicted_;
  // Every codebook transposed to [vec_dim][entries] (LutBuildArgs::books_t),
  // made once at construction (a few MB at most) so table builds never
  // transpose per call.
  std::vector<float> books_t_;
  size_t book_floats_ = 0;
  // The current step's items: experts (ascending or selection order), and
  // per pair the token and the output slot.
  std::vector<Item> items_;
  std::vector<uint32_t> pair_token_, pair_out_;
  std::vector<ExpertPin> pins_;     // the current window's pins, released after it runs
  struct Unit {
    uint32_t item, g0;
  };
  std::vector<Unit> units_;  // the current window's work units
};

}  // namespace waste
