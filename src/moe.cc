#include "moe.h"

#include <algorithm>
#include <cstring>

namespace waste {
namespace {

constexpr size_t kTauBlock = 32;   // VQ4P: one int8 scale per 32 vector positions
constexpr size_t kApplyRows = 64;  // one index block: the natural unit of work

// Acquire, with the time spent there booked as waiting for reads.
Result<ExpertRef> AcquireTimed(const Ops& ops, ExpertCache& cache, int layer, int expert) {
  ScopedPhase phase(ops.profiler(), Phase::kReadWait);
  return cache.Acquire(layer, expert);
}

}  // namespace

MoeLayer::MoeLayer(const Container& container, size_t max_tokens)
    : container_(container),
      cfg_(container.config()),
      max_tokens_(max_tokens),
      six_bit_(container.config().quant.index_bits == 6),
      shared_(container.config(), static_cast<size_t>(container.config().shared_inter()),
              max_tokens) {
  const ModelConfig& c = cfg_;
  const size_t vd = static_cast<size_t>(c.quant.vec_dim);
  const size_t per_v = static_cast<size_t>(c.quant.stages * c.quant.entries);
  const size_t x = static_cast<size_t>(c.expert_in());
  const size_t mid = static_cast<size_t>(c.moe_inter);
  nv_in_ = x / vd;
  nv_mid_ = mid / vd;
  table_in_ = nv_in_ * per_v;
  table_mid_ = nv_mid_ * per_v;
  tau_in_ = (nv_in_ + kTauBlock - 1) / kTauBlock;
  tau_mid_ = (nv_mid_ + kTauBlock - 1) / kTauBlock;
  logits_.resize(static_cast<size_t>(c.n_experts));
  scores_.resize(static_cast<size_t>(c.n_experts));
  xe_.resize(c.latent_dim > 0 ? max_tokens * x : 0);
  y_.resize(max_tokens * x);
  g_.resize(mid);
  u_.resize(mid);
  d_.resize(std::max(x, static_cast<size_t>(c.hidden)));  // expert output, or latent up-projection
  shared_out_.resize(max_tokens * static_cast<size_t>(c.hidden));
  tables_.resize(2 * max_tokens * table_in_);
  table_mid_buf_.resize(table_mid_);
  if (six_bit_) {
    qtables_.resize(2 * max_tokens * table_in_);
    taus_.resize(2 * max_tokens * tau_in_);
    qtable_mid_.resize(table_mid_);
    tau_mid_buf_.resize(tau_mid_);
  }
  chunk_routes_.resize(max_tokens);
}

uint64_t MoeLayer::scratch_bytes() const {
  uint64_t f = logits_.size() + scores_.size() + xe_.size() + y_.size() + g_.size() + u_.size() +
               d_.size() + shared_out_.size() + tables_.size() + table_mid_buf_.size() +
               taus_.size() + tau_mid_buf_.size();
  return f * sizeof(float) + qtables_.size() + qtable_mid_.size() + shared_.scratch_bytes();
}

void MoeLayer::Route(const Ops& ops, const MoeWeights& w, const float* x, Routing* r) {
  const int e_count = cfg_.n_experts, k = cfg_.top_k;
  ops.MatVec(*w.router, x, logits_.data());
  for (int e = 0; e < e_count; ++e) {
    float s = Sigmoid(logits_[static_cast<size_t>(e)]);
    logits_[static_cast<size_t>(e)] = s;  // unbiased score: the weight
    scores_[static_cast<size_t>(e)] = s + (w.router_bias != nullptr ? w.router_bias[e] : 0.0f);
  }
  r->ids.assign(static_cast<size_t>(k), -1);
  r->weights.assign(static_cast<size_t>(k), 0.0f);
  // K rounds of greedy argmax over the biased score: strict '>' from -1e30,
  // so ties go to the lowest id.
  for (int j = 0; j < k; ++j) {
    int best = -1;
    float bv = -1e30f;
    for (int e = 0; e < e_count; ++e) {
      if (std::find(r->ids.begin(), r->ids.begin() + j, e) != r->ids.begin() + j) continue;
      if (scores_[static_cast<size_t>(e)] > bv) {
        bv = scores_[static_cast<size_t>(e)];
        best = e;
      }
    }
    if (best < 0) best = 0;  // only with NaN scores; keeps the id valid
    r->ids[static_cast<size_t>(j)] = best;
    r->weights[static_cast<size_t>(j)] = logits_[static_cast<size_t>(best)];
  }
  if (cfg_.moe_renormalize && k > 1) {
    float sum = 0.0f;
    for (float v : r->weights) sum += v;
    for (float& v : r->weights) v = v / (sum + 1e-20f);
  }
  for (float& v : r->weights) v *= cfg_.routed_scaling;
}

void MoeLayer::Predict(const Ops& ops, const MoeWeights& w, const float* x, int count,
                       std::vector<int>* ids) {
  const int e_count = cfg_.n_experts;
  ops.MatVec(*w.router, x, logits_.data());
  for (int e = 0; e < e_count; ++e) {
    scores_[static_cast<size_t>(e)] = Sigmoid(logits_[static_cast<size_t>(e)]) +
                                      (w.router_bias != nullptr ? w.router_bias[e] : 0.0f);
  }
  ids->clear();
  count = std::min(count, e_count);
  for (int j = 0; j < count; ++j) {
    int best = -1;
    float bv = -1e30f;
    for (int e = 0; e < e_count; ++e) {
      if (std::find(ids->begin(), ids->end(), e) != ids->end()) continue;
      if (scores_[static_cast<size_t>(e)] > bv) {
        bv = scores_[static_cast<size_t>(e)];
        best = e;
      }
    }
    if (best < 0) break;
    ids->push_back(best);
  }
}

void MoeLayer::BuildTable(const Ops& ops, const float* x, size_t n, int book_base, float* table,
                          int8_t* qtable, float* tau) {
  const size_t stages = static_cast<size_t>(cfg_.quant.stages);
  const float* books[8];
  for (size_t s = 0; s < stages; ++s) books[s] = container_.Codebook(book_base + static_cast<int>(s));
  kernels::LutBuildArgs a;
  a.x = x;
  a.books = books;
  a.stages = stages;
  a.entries = static_cast<size_t>(cfg_.quant.entries);
  a.vec_dim = static_cast<size_t>(cfg_.quant.vec_dim);
  a.table = table;
  const size_t nv = n / a.vec_dim;
  ScopedPhase phase(ops.profiler(), Phase::kLutBuild);
  auto build = ops.k().lut_build;
  ops.For(nv, 16, [&](size_t b, size_t e) { build(a, b, e); });
  if (qtable != nullptr) {
    kernels::LutQuantizeArgs q;
    q.table = table;
    q.nv = nv;
    q.per_v = stages * a.entries;
    q.out = qtable;
    q.tau = tau;
    auto quant = ops.k().lut_quantize;
    ops.For((nv + kTauBlock - 1) / kTauBlock, 1, [&](size_t b, size_t e) { quant(q, b, e); });
  }
}

void MoeLayer::Apply(const Ops& ops, const uint8_t* indices, size_t rows, size_t nv,
                     const float* table, const int8_t* qtable, const float* tau,
                     const uint16_t* scales, float* y) {
  ScopedPhase phase(ops.profiler(), Phase::kExperts);
  if (six_bit_) {
    kernels::VqApply6Args a;
    a.indices = indices;
    a.nv = nv;
    a.table = qtable;
    a.tau = tau;
    a.scales = scales;
    a.y = y;
    auto fn = ops.k().vq_apply6;
    ops.For(rows, kApplyRows, [&](size_t b, size_t e) { fn(a, b, e); });
    return;
  }
  kernels::VqApply8Args a;
  a.indices = indices;
  a.nv = nv;
  a.stages = static_cast<size_t>(cfg_.quant.stages);
  a.entries = static_cast<size_t>(cfg_.quant.entries);
  a.table = table;
  a.scales = scales;
  a.y = y;
  auto fn = ops.k().vq_apply8;
  ops.For(rows, kApplyRows, [&](size_t b, size_t e) { fn(a, b, e); });
}

void MoeLayer::ApplyExpert(const Ops& ops, const ExpertRecordView& rec, const float* table_gate,
                           const int8_t* q_gate, const float* tau_gate, const float* table_up,
                           const int8_t* q_up, const float* tau_up, float weight, float* y) {
  const size_t mid = static_cast<size_t>(cfg_.moe_inter);
  const size_t x = static_cast<size_t>(cfg_.expert_in());
  Apply(ops, rec.gate, mid, nv_in_, table_gate, q_gate, tau_gate, rec.scale_gate, g_.data());
  Apply(ops, rec.up, mid, nv_in_, table_up, q_up, tau_up, rec.scale_up, u_.data());
  GatedActivation(cfg_, g_.data(), u_.data(), mid);
  BuildTable(ops, g_.data(), mid, rec.codebook_id + 2 * cfg_.quant.stages, table_mid_buf_.data(),
             six_bit_ ? qtable_mid_.data() : nullptr, tau_mid_buf_.data());
  Apply(ops, rec.down, x, nv_mid_, table_mid_buf_.data(), qtable_mid_.data(),
        tau_mid_buf_.data(), rec.scale_down, d_.data());
  // One expression form everywhere (MODEL.md §5.3) so every path rounds alike.
  for (size_t i = 0; i < x; ++i) y[i] += weight * d_[i];
}

Status MoeLayer::Forward(const Ops& ops, const MoeWeights& w, int layer, ExpertCache& cache,
                         const float* x, float* out, Routing* routing, const Lookahead& next) {
  const size_t xw = static_cast<size_t>(cfg_.expert_in());
  const size_t h = static_cast<size_t>(cfg_.hidden);
  Routing local;
  Routing& r = routing != nullptr ? *routing : local;
  {
    ScopedPhase phase(ops.profiler(), Phase::kRouter);
    Route(ops, w, x, &r);
  }
  cache.Hint(layer, r.ids);
  const float* xe = x;
  if (w.latent_down != nullptr) {
    ScopedPhase phase(ops.profiler(), Phase::kExperts);
    ops.MatVec(*w.latent_down, x, xe_.data());
    xe = xe_.data();
  }
  float* tg = tables_.data();
  float* tu = tables_.data() + table_in_;
  int8_t* qg = six_bit_ ? qtables_.data() : nullptr;
  int8_t* qu = six_bit_ ? qtables_.data() + table_in_ : nullptr;
  float* tau_g = six_bit_ ? taus_.data() : nullptr;
  float* tau_u = six_bit_ ? taus_.data() + tau_in_ : nullptr;
  std::fill(y_.begin(), y_.begin() + static_cast<std::ptrdiff_t>(xw), 0.0f);
  for (size_t j = 0; j < r.ids.size(); ++j) {
    auto ref = AcquireTimed(ops, cache, layer, r.ids[j]);
    if (!ref) return ref.error();
    if (j == 0) {
      // Gate/up tables depend only on the input and the layer's books
      // (taken from the first routed record), shared by all k experts.
      int base = ref->view.codebook_id;
      BuildTable(ops, xe, xw, base, tg, qg, tau_g);
      BuildTable(ops, xe, xw, base + cfg_.quant.stages, tu, qu, tau_u);
    }
    ApplyExpert(ops, ref->view, tg, qg, tau_g, tu, qu, tau_u, r.weights[j], y_.data());
    cache.Release(ref->slot);
  }
  if (next.weights != nullptr && next.count > 0) {
    // The next router on THIS layer's router input (the reference's rule):
    // its guess starts reads while this layer's shared experts compute.
    ScopedPhase phase(ops.profiler(), Phase::kRouter);
    Predict(ops, *next.weights, x, next.count, &predicted_);
    cache.Prefetch(next.layer, predicted_);
  }
  const float* routed = y_.data();
  if (w.latent_up != nullptr) {
    ScopedPhase phase(ops.profiler(), Phase::kExperts);
    if (w.latent_norm != nullptr) RmsNorm(y_.data(), w.latent_norm, cfg_.rms_eps, xw, y_.data());
    ops.MatVec(*w.latent_up, y_.data(), d_.data());
    routed = d_.data();
  }
  {
    ScopedPhase phase(ops.profiler(), Phase::kShared);
    shared_.Forward(ops, w.shared, x, shared_out_.data());
  }
  for (size_t i = 0; i < h; ++i) out[i] = routed[i] + shared_out_[i];
  return Status::Ok();
}

Status MoeLayer::ForwardChunk(const Ops& ops, const MoeWeights& w, int layer, ExpertCache& cache,
                              const float* x, size_t tokens, float* out) {
  const size_t xw = static_cast<size_t>(cfg_.expert_in());
  const size_t h = static_cast<size_t>(cfg_.hidden);
  {
    ScopedPhase phase(ops.profiler(), Phase::kRouter);
    for (size_t t = 0; t < tokens; ++t) Route(ops, w, x + t * h, &chunk_routes_[t]);
  }
  const float* xe = x;
  size_t xe_stride = h;
  if (w.latent_down != nullptr) {
    ops.MatMul(*w.latent_down, x, h, tokens, xe_.data(), xw);
    xe = xe_.data();
    xe_stride = xw;
  }
  std::vector<int> distinct;
  for (size_t t = 0; t < tokens; ++t) {
    distinct.insert(distinct.end(), chunk_routes_[t].ids.begin(), chunk_routes_[t].ids.end());
  }
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::fill(y_.begin(), y_.begin() + static_cast<std::ptrdiff_t>(tokens * xw), 0.0f);
  cache.Hint(layer, distinct);

  bool tables_built = false;
  for (int e : distinct) {
    auto ref = AcquireTimed(ops, cache, layer, e);
    if (!ref) return ref.error();
    if (!tables_built) {
      int base = ref->view.codebook_id;
      for (size_t t = 0; t < tokens; ++t) {
        float* tg = tables_.data() + (2 * t) * table_in_;
        int8_t* qg = six_bit_ ? qtables_.data() + (2 * t) * table_in_ : nullptr;
        float* tau_g = six_bit_ ? taus_.data() + (2 * t) * tau_in_ : nullptr;
        BuildTable(ops, xe + t * xe_stride, xw, base, tg, qg, tau_g);
        BuildTable(ops, xe + t * xe_stride, xw, base + cfg_.quant.stages, tg + table_in_,
                   qg != nullptr ? qg + table_in_ : nullptr,
                   tau_g != nullptr ? tau_g + tau_in_ : nullptr);
      }
      tables_built = true;
    }
    for (size_t t = 0; t < tokens; ++t) {
      const Routing& r = chunk_routes_[t];
      for (size_t j = 0; j < r.ids.size(); ++j) {
        if (r.ids[j] != e) continue;
        const float* tg = tables_.data() + (2 * t) * table_in_;
        const int8_t* qg = six_bit_ ? qtables_.data() + (2 * t) * table_in_ : nullptr;
        const float* tau_g = six_bit_ ? taus_.data() + (2 * t) * tau_in_ : nullptr;
        ApplyExpert(ops, ref->view, tg, qg, tau_g, tg + table_in_,
                    qg != nullptr ? qg + table_in_ : nullptr,
                    tau_g != nullptr ? tau_g + tau_in_ : nullptr, r.weights[j],
                    y_.data() + t * xw);
      }
    }
    cache.Release(ref->slot);
  }
  {
    ScopedPhase phase(ops.profiler(), Phase::kShared);
    shared_.ForwardChunk(ops, w.shared, x, tokens, shared_out_.data());
  }
  for (size_t t = 0; t < tokens; ++t) {
    float* yt = y_.data() + t * xw;
    const float* routed = yt;
    if (w.latent_up != nullptr) {
      if (w.latent_norm != nullptr) RmsNorm(yt, w.latent_norm, cfg_.rms_eps, xw, yt);
      ops.MatVec(*w.latent_up, yt, d_.data());
      routed = d_.data();
    }
    for (size_t i = 0; i < h; ++i) out[t * h + i] = routed[i] + shared_out_[t * h + i];
  }
  return Status::Ok();
}

}  // namespace waste
