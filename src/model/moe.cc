#include "model/moe.h"

#include <algorithm>
#include <cstring>

#include "model/moe_router.h"

namespace waste {
namespace {

constexpr size_t kTauBlock = 32;    // VQ4P: one int8 scale per 32 vector positions
constexpr size_t kGroup = 4;        // tokens of one item processed together
constexpr size_t kTableChunk = 32;  // vector positions per table-build task (a tau block)
constexpr size_t kWindow = 16;      // experts acquired and run per parallel region (chunks)

// Experts pinned at once by one parallel region: up to kWindow, but never
// more than a quarter of the cache (hints pin records too), so tiny caches
// still work one or two experts at a time.
size_t Window(const ExpertCache& cache) {
  return std::clamp<size_t>(static_cast<size_t>(cache.slots() / 4), 1, kWindow);
}

// Acquire, with the time spent there booked as waiting for reads.
ExpertResult AcquireTimed(const Ops& ops, ExpertCache& cache, int layer, int expert) {
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
  const size_t mid = static_cast<size_t>(c.moe.inter);
  const size_t k = static_cast<size_t>(c.moe.top_k);
  nv_in_ = x / vd;
  nv_mid_ = mid / vd;
  table_in_ = nv_in_ * per_v;
  table_mid_ = nv_mid_ * per_v;
  tau_in_ = (nv_in_ + kTauBlock - 1) / kTauBlock;
  tau_mid_ = (nv_mid_ + kTauBlock - 1) / kTauBlock;
  logits_.resize(static_cast<size_t>(c.moe.n_experts));
  scores_.resize(static_cast<size_t>(c.moe.n_experts));
  xe_.resize(c.moe.input == ExpertInput::kLatent ? max_tokens * x : 0);
  y_.resize(max_tokens * x);
  d_.resize(std::max(x, static_cast<size_t>(c.hidden)));  // latent up-projection
  shared_out_.resize(max_tokens * static_cast<size_t>(c.hidden));
  tables_.resize(2 * max_tokens * table_in_);
  if (six_bit_) {
    qtables_.resize(2 * max_tokens * table_in_);
    taus_.resize(2 * max_tokens * tau_in_);
  }
  outs_.resize(max_tokens * k * x);
  group_scratch_.resize(RouterScratchFloats(c.moe));
  route_stride_ = 2 * static_cast<size_t>(c.moe.n_experts) + RouterScratchFloats(c.moe);
  route_scratch_.resize(max_tokens * route_stride_);
  chunk_routes_.resize(max_tokens);
  const size_t entries = static_cast<size_t>(c.quant.entries);
  book_floats_ = entries * vd;
  books_t_.resize(static_cast<size_t>(container.codebook_count()) * book_floats_);
  for (int b = 0; b < container.codebook_count(); ++b) {
    const float* src = container.Codebook(b);
    float* dst = books_t_.data() + static_cast<size_t>(b) * book_floats_;
    for (size_t e = 0; e < entries; ++e) {
      for (size_t t = 0; t < vd; ++t) dst[t * entries + e] = src[e * vd + t];
    }
  }
}

uint64_t MoeLayer::scratch_bytes() const {
  uint64_t f = books_t_.size() + logits_.size() + scores_.size() + group_scratch_.size() +
               xe_.size() + y_.size() + d_.size() +
               shared_out_.size() + tables_.size() + taus_.size() + outs_.size() +
               route_scratch_.size();
  uint64_t b = f * sizeof(float) + qtables_.size() + shared_.scratch_bytes();
  const size_t mid = static_cast<size_t>(cfg_.moe.inter);
  const uint64_t per_thread = (2 * kGroup * mid + kGroup * table_mid_ + kGroup * tau_mid_) * sizeof(float) +
                              (six_bit_ ? kGroup * table_mid_ : 0);
  return b + per_thread * std::max<size_t>(1, scratch_.size());
}

void MoeLayer::RouteWith(const Ops& ops, const MoeWeights& w, const float* x, Routing* r,
                         float* logits, float* scores, float* group_scratch) {
  const MoeConfig& m = cfg_.moe;
  const int k = m.top_k;
  ops.MatVec(*w.router, x, logits);
  RouterScores(m, w.router_bias, logits, scores);  // logits become the unbiased scores
  r->ids.assign(static_cast<size_t>(k), -1);
  r->weights.assign(static_cast<size_t>(k), 0.0f);
  const int chosen = TopExperts(m, scores, k, group_scratch, r->ids.data());
  // Fewer only with NaN scores: expert 0 keeps the ids valid.
  for (int j = chosen; j < k; ++j) r->ids[static_cast<size_t>(j)] = 0;
  RoutingWeights(m, logits, r->ids.data(), k, r->weights.data());
}

void MoeLayer::Route(const Ops& ops, const MoeWeights& w, const float* x, Routing* r) {
  RouteWith(ops, w, x, r, logits_.data(), scores_.data(), group_scratch_.data());
}

void MoeLayer::Predict(const Ops& ops, const MoeWeights& w, const float* x, int count,
                       std::vector<int>* ids) {
  const MoeConfig& m = cfg_.moe;
  ops.MatVec(*w.router, x, logits_.data());
  RouterScores(m, w.router_bias, logits_.data(), scores_.data());
  ids->resize(static_cast<size_t>(std::max(0, std::min(count, m.n_experts))));
  const int chosen = TopExperts(m, scores_.data(), static_cast<int>(ids->size()),
                                group_scratch_.data(), ids->data());
  ids->resize(static_cast<size_t>(chosen));
}

// Positions [v_begin, v_end) of one table; VQ4P also quantises the tau
// blocks inside the range (callers pass ranges aligned to kTauBlock).
void MoeLayer::BuildTableSerial(const kernels::KernelTable& k, const float* x, size_t n,
                                int book_base, float* table, int8_t* qtable, float* tau,
                                size_t v_begin, size_t v_end) {
  const size_t stages = static_cast<size_t>(cfg_.quant.stages);
  const float* books[8];
  const float* books_t[8];
  for (size_t s = 0; s < stages; ++s) {
    const int id = book_base + static_cast<int>(s);
    books[s] = container_.Codebook(id);
    books_t[s] = books_t_.data() + static_cast<size_t>(id) * book_floats_;
  }
  kernels::LutBuildArgs a;
  a.x = x;
  a.books = books;
  a.books_t = books_t;
  a.stages = stages;
  a.entries = static_cast<size_t>(cfg_.quant.entries);
  a.vec_dim = static_cast<size_t>(cfg_.quant.vec_dim);
  if (planes_) {
    a.planes = reinterpret_cast<uint8_t*>(table);
  } else {
    a.table = table;
  }
  k.lut_build(a, v_begin, v_end);
  if (qtable != nullptr) {
    kernels::LutQuantizeArgs q;
    q.table = table;
    q.nv = n / a.vec_dim;
    q.per_v = stages * a.entries;
    q.out = qtable;
    q.tau = tau;
    k.lut_quantize(q, v_begin / kTauBlock, (v_end + kTauBlock - 1) / kTauBlock);
  }
}

void MoeLayer::BuildInputTables(const Ops& ops, const float* x, size_t x_stride, size_t tokens,
                                int book_base) {
  ScopedPhase phase(ops.profiler(), Phase::kLutBuild);
  const size_t chunks = (nv_in_ + kTableChunk - 1) / kTableChunk;
  const size_t units = tokens * 2 * chunks;
  const size_t xw = static_cast<size_t>(cfg_.expert_in());
  const kernels::KernelTable& k = ops.k();
  const size_t per_task = std::max<size_t>(1, units / (4 * static_cast<size_t>(ops.threads())));
  ops.ForDynamic(units, per_task, [&](size_t b, size_t e) {
    for (size_t u = b; u < e; ++u) {
      const size_t t = u / (2 * chunks), which = (u / chunks) % 2, c = u % chunks;
      const int base = book_base + static_cast<int>(which) * cfg_.quant.stages;
      BuildTableSerial(k, x + t * x_stride, xw, base, TableIn(t, static_cast<int>(which)),
                       QTableIn(t, static_cast<int>(which)), TauIn(t, static_cast<int>(which)),
                       c * kTableChunk, std::min(nv_in_, (c + 1) * kTableChunk));
    }
  });
}

void MoeLayer::RunItem(const kernels::KernelTable& k, const Item& item, size_t g0, Scratch& s) {
  const size_t mid = static_cast<size_t>(cfg_.moe.inter);
  const size_t xw = static_cast<size_t>(cfg_.expert_in());
  const ExpertRecordView& rec = item.view;
  const int down_base = rec.codebook_id + 2 * cfg_.quant.stages;
  const size_t gn = std::min(kGroup, item.n - g0);
  size_t tok[kGroup] = {};
  float* outp[kGroup] = {};
  float* gp[kGroup] = {};
  float* up[kGroup] = {};
  for (size_t i = 0; i < gn; ++i) {
    tok[i] = pair_token_[item.first + g0 + i];
    outp[i] = outs_.data() + static_cast<size_t>(pair_out_[item.first + g0 + i]) * xw;
    gp[i] = s.g.data() + i * mid;
    up[i] = s.u.data() + i * mid;
  }
  if (six_bit_) {
    for (size_t i = 0; i < gn; ++i) {
      for (int which = 0; which < 2; ++which) {
        kernels::VqApply6Args a;
        a.nv = nv_in_;
        a.indices = which == 0 ? rec.gate : rec.up;
        a.table = QTableIn(tok[i], which);
        a.tau = TauIn(tok[i], which);
        a.scales = which == 0 ? rec.scale_gate : rec.scale_up;
        a.y = which == 0 ? gp[i] : up[i];
        k.vq_apply6(a, 0, mid);
      }
    }
  } else {
    const float* tabs[kGroup] = {};
    for (int which = 0; which < 2; ++which) {
      for (size_t i = 0; i < gn; ++i) tabs[i] = TableIn(tok[i], which);
      Apply8(k, which == 0 ? rec.gate : rec.up, which == 0 ? rec.scale_gate : rec.scale_up,
             nv_in_, tabs, gn, which == 0 ? gp : up, mid);
    }
  }
  for (size_t i = 0; i < gn; ++i) {
    GatedActivation(cfg_, gp[i], up[i], mid);
    BuildTableSerial(k, gp[i], mid, down_base, s.table_mid.data() + i * table_mid_,
                     six_bit_ ? s.q_mid.data() + i * table_mid_ : nullptr,
                     six_bit_ ? s.tau_mid.data() + i * tau_mid_ : nullptr, 0, nv_mid_);
  }
  if (six_bit_) {
    for (size_t i = 0; i < gn; ++i) {
      kernels::VqApply6Args a;
      a.indices = rec.down;
      a.nv = nv_mid_;
      a.table = s.q_mid.data() + i * table_mid_;
      a.tau = s.tau_mid.data() + i * tau_mid_;
      a.scales = rec.scale_down;
      a.y = outp[i];
      k.vq_apply6(a, 0, xw);
    }
  } else {
    const float* tabs[kGroup] = {};
    for (size_t i = 0; i < gn; ++i) tabs[i] = s.table_mid.data() + i * table_mid_;
    Apply8(k, rec.down, rec.scale_down, nv_mid_, tabs, gn, outp, xw);
  }
}

void MoeLayer::Apply8(const kernels::KernelTable& k, const uint8_t* indices,
                      const uint16_t* scales, size_t nv, const float* const* tables, size_t n,
                      float* const* ys, size_t rows) const {
  const uint8_t* planes[kGroup] = {};
  for (size_t i = 0; i < n; ++i) planes[i] = reinterpret_cast<const uint8_t*>(tables[i]);
  kernels::VqApply8Args a;
  a.indices = indices;
  a.nv = nv;
  a.stages = static_cast<size_t>(cfg_.quant.stages);
  a.entries = static_cast<size_t>(cfg_.quant.entries);
  a.scales = scales;
  a.count = n;
  a.tables = planes_ ? nullptr : tables;
  a.plane_sets = planes_ ? planes : nullptr;
  a.ys = ys;
  k.vq_apply8(a, 0, rows);
}

Status MoeLayer::RunItems(const Ops& ops, ExpertCache& cache, int layer, size_t b, size_t e) {
  Status status = Status::Ok();
  for (size_t i = b; i < e; ++i) {
    auto pin = AcquireTimed(ops, cache, layer, items_[i].expert);
    if (!pin) {
      status = pin.error();
      break;
    }
    items_[i].view = pin->view();
    pins_[i] = std::move(*pin);
  }
  if (status.ok()) {
    ScopedPhase phase(ops.profiler(), Phase::kExperts);
    const kernels::KernelTable& k = ops.k();
    // Work units of up to kGroup tokens of one expert: an expert chosen by
    // many tokens of a chunk is shared by both threads instead of keeping
    // one busy while the other waits at the join.
    units_.clear();
    for (size_t i = b; i < e; ++i) {
      for (size_t g0 = 0; g0 < items_[i].n; g0 += kGroup) {
        units_.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(g0)});
      }
    }
    ops.ForDynamic(units_.size(), 1, [&](size_t u0, size_t u1) {
      Scratch& s = scratch_[static_cast<size_t>(Ops::Worker())];
      for (size_t u = u0; u < u1; ++u) RunItem(k, items_[units_[u].item], units_[u].g0, s);
    });
  }
  for (size_t i = b; i < e; ++i) pins_[i].Reset();
  return status;
}

Status MoeLayer::RunAllItems(const Ops& ops, ExpertCache& cache, int layer, size_t late_window) {
  // Resident items first, each group in its old order. Items carry their
  // pair ranges, so reordering them moves no output.
  const auto late_begin = std::stable_partition(
      items_.begin(), items_.end(), [&](const Item& it) { return cache.Ready(layer, it.expert); });
  const size_t ready = static_cast<size_t>(late_begin - items_.begin());
  const size_t window = Window(cache);
  for (size_t b = 0; b < ready; b += window) {
    WASTE_TRY(RunItems(ops, cache, layer, b, std::min(ready, b + window)));
  }
  const size_t late = std::clamp<size_t>(late_window, 1, window);
  for (size_t b = ready; b < items_.size(); b += late) {
    WASTE_TRY(RunItems(ops, cache, layer, b, std::min(items_.size(), b + late)));
  }
  return Status::Ok();
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
  // One item per routed expert, in selection order; output j = pair j.
  const size_t k = r.ids.size();
  PrepareScratch(ops);
  items_.assign(k, Item{});
  pins_.clear();
  pins_.resize(k);
  pair_token_.assign(k, 0);
  pair_out_.resize(k);
  for (size_t j = 0; j < k; ++j) {
    items_[j].expert = r.ids[j];
    items_[j].first = j;
    items_[j].n = 1;
    pair_out_[j] = static_cast<uint32_t>(j);
  }
  // Gate/up tables depend only on the input and the layer's books, shared
  // by all k experts. Every record of a layer names its bank's codebook base
  // (ParseRecord refuses any other), so no record is needed to pick them and
  // the step can start on whichever experts are already in memory.
  BuildInputTables(ops, xe, xw, 1, container_.bank(layer).codebook_base);
  // Late experts one per thread at a time: each lands while the others compute.
  WASTE_TRY(RunAllItems(ops, cache, layer, static_cast<size_t>(ops.threads())));
  {
    // One expression form everywhere (MODEL.md §5.3), in selection order.
    ScopedPhase phase(ops.profiler(), Phase::kExperts);
    std::fill(y_.begin(), y_.begin() + static_cast<std::ptrdiff_t>(xw), 0.0f);
    for (size_t j = 0; j < k; ++j) {
      const float wj = r.weights[j];
      const float* d = outs_.data() + j * xw;
      for (size_t i = 0; i < xw; ++i) y_[i] += wj * d[i];
    }
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
  const size_t ne = static_cast<size_t>(cfg_.moe.n_experts);
  const size_t topk = static_cast<size_t>(cfg_.moe.top_k);
  PrepareScratch(ops);
  {
    // Routing per token with the decode matvec (identical rule), tokens in
    // parallel, each matvec whole on one thread.
    ScopedPhase phase(ops.profiler(), Phase::kRouter);
    const Ops serial(ops.k(), nullptr, nullptr);
    ops.ForDynamic(tokens, 1, [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t) {
        float* ls = route_scratch_.data() + t * route_stride_;
        RouteWith(serial, w, x + t * h, &chunk_routes_[t], ls, ls + ne, ls + 2 * ne);
      }
    });
  }
  const float* xe = x;
  size_t xe_stride = h;
  if (w.latent_down != nullptr) {
    ops.MatMul(*w.latent_down, x, h, tokens, xe_.data(), xw);
    xe = xe_.data();
    xe_stride = xw;
  }
  // Distinct experts, ascending; each item lists its (token, selection)
  // pairs in token order. Pair output slot = t * top_k + j.
  std::vector<int> distinct;
  for (size_t t = 0; t < tokens; ++t) {
    distinct.insert(distinct.end(), chunk_routes_[t].ids.begin(), chunk_routes_[t].ids.end());
  }
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
  std::vector<uint32_t> count(ne, 0), start(ne + 1, 0);
  for (size_t t = 0; t < tokens; ++t) {
    for (int e : chunk_routes_[t].ids) ++count[static_cast<size_t>(e)];
  }
  for (size_t e = 0; e < ne; ++e) start[e + 1] = start[e] + count[e];
  pair_token_.assign(start[ne], 0);
  pair_out_.assign(start[ne], 0);
  std::vector<uint32_t> fill(start.begin(), start.end() - 1);
  for (size_t t = 0; t < tokens; ++t) {
    const Routing& r = chunk_routes_[t];
    for (size_t j = 0; j < r.ids.size(); ++j) {
      const uint32_t p = fill[static_cast<size_t>(r.ids[j])]++;
      pair_token_[p] = static_cast<uint32_t>(t);
      pair_out_[p] = static_cast<uint32_t>(t * topk + j);
    }
  }
  items_.assign(distinct.size(), Item{});
  pins_.clear();
  pins_.resize(distinct.size());
  for (size_t i = 0; i < distinct.size(); ++i) {
    const size_t e = static_cast<size_t>(distinct[i]);
    items_[i].expert = distinct[i];
    items_[i].first = start[e];
    items_[i].n = count[e];
  }
  cache.Hint(layer, distinct);
  BuildInputTables(ops, xe, xe_stride, tokens, container_.bank(layer).codebook_base);
  WASTE_TRY(RunAllItems(ops, cache, layer, Window(cache)));
  {
    // Each token's sum in ascending expert id, one expression form.
    ScopedPhase phase(ops.profiler(), Phase::kExperts);
    for (size_t t = 0; t < tokens; ++t) {
      const Routing& r = chunk_routes_[t];
      size_t order[64];
      const size_t kk = std::min<size_t>(r.ids.size(), 64);
      for (size_t j = 0; j < kk; ++j) order[j] = j;
      std::sort(order, order + kk, [&](size_t a, size_t b) { return r.ids[a] < r.ids[b]; });
      float* yt = y_.data() + t * xw;
      std::fill(yt, yt + xw, 0.0f);
      for (size_t jj = 0; jj < kk; ++jj) {
        const size_t j = order[jj];
        const float wj = r.weights[j];
        const float* d = outs_.data() + (t * topk + j) * xw;
        for (size_t i = 0; i < xw; ++i) yt[i] += wj * d[i];
      }
    }
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

void MoeLayer::PrepareScratch(const Ops& ops) {
  planes_ = ops.k().vq8_planes && !six_bit_;
  const size_t threads = static_cast<size_t>(ops.threads());
  if (scratch_.size() >= threads) return;
  const size_t mid = static_cast<size_t>(cfg_.moe.inter);
  scratch_.resize(threads);
  for (Scratch& s : scratch_) {
    s.g.resize(kGroup * mid);
    s.u.resize(kGroup * mid);
    s.table_mid.resize(kGroup * table_mid_);
    if (six_bit_) {
      s.q_mid.resize(kGroup * table_mid_);
      s.tau_mid.resize(kGroup * tau_mid_);
    }
  }
}

}  // namespace waste
