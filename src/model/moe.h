// Mixture-of-experts block: the router (model/moe_router.h: sigmoid or
// softmax scores, a selection-only correction bias, global or group-limited
// top-k, renormalisation and routed_scaling_factor); routed experts applied
// by their format's code (model/vq_experts.h); optional latent projection
// and norm (latent MoE); shared experts on the full input.
//
// One Forward serves a decode step (one token) and a prompt chunk. A step's
// routed experts become items (an expert and the tokens that chose it):
// each distinct expert is acquired once and applied to all its tokens.
// Items are independent work units run on the thread pool (one fork-join
// per window of experts, not one per matrix); a unit applies one expert to
// up to VqExperts::kGroup tokens, writes per-(token, choice) outputs, and
// the outputs are summed afterwards in the spec's order — selection order
// for a single token, ascending expert id in a chunk — with the one
// expression form. Experts already in memory run first, so their compute
// covers the reads still in flight. Every row of every output is computed
// by the same kernels whatever the thread count, so results are
// bit-identical at any thread count.
//
// A call runs in two phases: the experts applied through the gate/up
// tables, window by window of VqExperts::kTableTokens tokens (tables built
// for the window's tokens only, so their memory does not grow with the
// call), then the experts that enough tokens of one chunk chose to be
// decoded (VqExperts::ApplyDecoded, the tokens of every chunk that decodes
// them at once). A token's result through either path does not depend on
// which window, group or batch computed it (a kernel contract,
// kernels/kernel_table.h), so windows and spans change timing and memory
// only.
#pragma once

#include <cstdint>
#include <vector>

#include "streaming/expert_cache.h"
#include "model/ffn.h"
#include "model/layer_weights.h"
#include "model/model_config.h"
#include "model/prefetcher.h"
#include "model/vq_experts.h"
#include "runtime/ops.h"

namespace waste {

struct Routing {
  std::vector<int> ids;        // selection order
  std::vector<float> weights;  // final weights (renormalised, scaled)
};

class MoeLayer {
 public:
  // Up to max_tokens a call, in chunks of chunk_tokens (0: max_tokens).
  MoeLayer(const Container& container, size_t max_tokens, size_t chunk_tokens = 0);

  // x, out: [tokens][hidden], tokens <= max_tokens. The tokens are chunks
  // of chunk_tokens from the first (a prompt span, model/forward.h): each
  // distinct expert is acquired once for the whole call, but everything
  // that decides a token's bits (decoded or table experts, the shared
  // expert's and latent projection's matmuls) sees its chunk only, so a call
  // over a span equals one call per chunk, bit for bit. `prefetch` (may be
  // null) guesses the next MoE layer's experts once this layer has routed;
  // only a single-token step asks it (a chunk routes every token at once).
  Status Forward(const Ops& ops, const MoeWeights& w, int layer, ExpertCache& cache,
                 const float* x, size_t tokens, float* out, Prefetcher* prefetch = nullptr);
  // Token t's routing in the last Forward.
  const Routing& routing(size_t t) const { return routes_[t]; }

  uint64_t scratch_bytes() const;

 private:
  // One expert applied to the tokens that chose it: pairs [first, first+n)
  // of pair_token_/pair_out_.
  struct Item {
    ExpertRecordView view;
    int expert = -1;
    size_t first = 0, n = 0;
  };

  // Routes tokens [0, tokens) into routes_ (a single token's router matvec
  // on the whole pool, a chunk's tokens in parallel, each matvec whole on
  // one thread: the same rows either way).
  void Route(const Ops& ops, const MoeWeights& w, const float* x, size_t tokens);
  // Builds all_items_ and the pairs from routes_: a single token's experts
  // in selection order (its first choice is read first), a chunk's distinct
  // experts ascending, each with its tokens in order. Pair output slot =
  // t * top_k + j. all_items_ then holds the decoded items first
  // (n_decoded_), each part in order; order_ (the cache's hint) is unchanged.
  void BuildItems(size_t tokens);
  // BuildItems' last step: an expert's pairs in the chunks that decode it
  // become its decoded item, the others its table item.
  void SplitDecodedPairs();
  // Whether an expert that `tokens` tokens of one chunk chose is decoded.
  bool Decodes(size_t tokens) const;
  // items_ = the table experts' pairs whose tokens lie in [t0, t1), one
  // item per expert with any (pairs are in token order, so a sub-range).
  void TableWindowItems(size_t t0, size_t t1);
  // Sums token t's per-choice outputs with its routing weights into y.
  void Combine(size_t t, bool selection_order, float* y);
  // How a RunItems call applies items_: through the tables of the window
  // that starts at token table_base, or by decoding the experts' rows.
  struct Pass {
    bool decoded = false;
    size_t table_base = 0;
  };
  // Pins items_[b, e) in order, runs them in parallel, releases them. x:
  // the step's expert inputs, [tokens][x_stride] (decoded experts read them
  // directly).
  Status RunItems(const Ops& ops, ExpertCache& cache, int layer, const float* x,
                  size_t x_stride, const Pass& pass, size_t b, size_t e);
  // Runs every item of the step: those already in memory first (their
  // compute covers the reads still in flight), then the rest in windows of
  // `late_window` as they land. Outputs go to per-pair slots and are summed
  // afterwards in the fixed order, so the order changes timing only.
  Status RunAllItems(const Ops& ops, ExpertCache& cache, int layer, const float* x,
                     size_t x_stride, const Pass& pass, size_t late_window);

  const ModelConfig& cfg_;
  const Container& container_;
  size_t chunk_;  // tokens per chunk of a call (the unit of every bit-deciding choice)
  VqExperts experts_;
  Mlp shared_;
  std::vector<float> xe_, y_, d_, shared_out_;
  std::vector<float> outs_;           // [max_tokens * top_k][expert_in] per-pair outputs
  std::vector<float> route_scratch_;  // [max_tokens][route_stride_] routing
  size_t route_stride_ = 0;           // 2 * n_experts + the router's group scratch
  std::vector<Routing> routes_;       // [max_tokens]
  std::vector<int> order_;            // the step's distinct experts, in item order
  std::vector<uint32_t> count_, start_, fill_;  // [n_experts] pairs per expert (BuildItems)
  std::vector<size_t> sum_order_;     // [top_k] Combine's order of a token's choices
  // The step's items (experts): all of them (BuildItems), and those of the
  // phase being run (decoded, or one table window); per pair the token and
  // the output slot.
  std::vector<Item> all_items_, items_;
  size_t n_decoded_ = 0;  // all_items_[0, n_decoded_) are decoded
  std::vector<uint32_t> pair_token_, pair_out_;
  std::vector<uint32_t> part_token_, part_out_;  // SplitDecodedPairs' reordering buffers
  std::vector<ExpertPin> pins_;  // the current window's pins, released after it runs
  struct Unit {
    uint32_t item, g0, n;  // n tokens of the item from its g0-th
  };
  std::vector<Unit> units_;  // the current window's work units
};

}  // namespace waste
