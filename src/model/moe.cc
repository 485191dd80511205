#include "model/moe.h"

#include <algorithm>
#include <cstring>

#include "model/chunks.h"
#include "model/moe_router.h"

namespace waste {
namespace {

constexpr size_t kWindow = 16;  // experts acquired and run per parallel region (chunks)

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

MoeLayer::MoeLayer(const Container& container, size_t max_tokens, size_t chunk_tokens)
    : cfg_(container.config()),
      container_(container),
      chunk_(std::clamp<size_t>(chunk_tokens == 0 ? max_tokens : chunk_tokens, 1, max_tokens)),
      experts_(container, max_tokens),
      shared_(container.config(), static_cast<size_t>(container.config().shared_inter()),
              chunk_) {
  const ModelConfig& c = cfg_;
  const size_t x = static_cast<size_t>(c.expert_in());
  const size_t ne = static_cast<size_t>(c.moe.n_experts);
  const size_t k = static_cast<size_t>(c.moe.top_k);
  xe_.resize(c.moe.input == ExpertInput::kLatent ? max_tokens * x : 0);
  y_.resize(max_tokens * x);
  d_.resize(std::max(x, static_cast<size_t>(c.hidden)));  // latent up-projection
  shared_out_.resize(max_tokens * static_cast<size_t>(c.hidden));
  outs_.resize(max_tokens * k * x);
  route_stride_ = 2 * ne + RouterScratchFloats(c.moe);
  route_scratch_.resize(max_tokens * route_stride_);
  part_token_.resize(max_tokens * k);
  part_out_.resize(max_tokens * k);
  routes_.resize(max_tokens);
  count_.resize(ne);
  start_.resize(ne);
  fill_.resize(ne);
  sum_order_.resize(k);
}

uint64_t MoeLayer::scratch_bytes() const {
  const uint64_t f = xe_.size() + y_.size() + d_.size() + shared_out_.size() + outs_.size() +
                     route_scratch_.size();
  const uint64_t u = count_.size() + start_.size() + fill_.size() + part_token_.size() +
                     part_out_.size();
  return f * sizeof(float) + u * sizeof(uint32_t) + sum_order_.size() * sizeof(size_t) +
         experts_.scratch_bytes() + shared_.scratch_bytes();
}

void MoeLayer::Route(const Ops& ops, const MoeWeights& w, const float* x, size_t tokens) {
  ScopedPhase phase(ops.profiler(), Phase::kRouter);
  const MoeConfig& m = cfg_.moe;
  const size_t ne = static_cast<size_t>(m.n_experts);
  const size_t h = static_cast<size_t>(cfg_.hidden);
  const auto route_one = [&](const Ops& on, size_t t) {
    float* logits = route_scratch_.data() + t * route_stride_;
    float* scores = logits + ne;
    Routing& r = routes_[t];
    const int k = m.top_k;
    on.MatVec(*w.router, x + t * h, logits);
    RouterScores(m, w.router_bias, logits, scores);  // logits become the unbiased scores
    r.ids.assign(static_cast<size_t>(k), -1);
    r.weights.assign(static_cast<size_t>(k), 0.0f);
    const int chosen = TopExperts(m, scores, k, scores + ne, r.ids.data());
    // Fewer only with NaN scores: expert 0 keeps the ids valid.
    for (int j = chosen; j < k; ++j) r.ids[static_cast<size_t>(j)] = 0;
    RoutingWeights(m, logits, r.ids.data(), k, r.weights.data());
  };
  if (tokens == 1) {
    route_one(ops, 0);
    return;
  }
  const Ops serial(ops.k(), nullptr, nullptr);
  ops.ForDynamic(tokens, 1, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) route_one(serial, t);
  });
}

void MoeLayer::BuildItems(size_t tokens) {
  const size_t ne = static_cast<size_t>(cfg_.moe.n_experts);
  const size_t topk = static_cast<size_t>(cfg_.moe.top_k);
  std::fill(count_.begin(), count_.end(), 0u);
  for (size_t t = 0; t < tokens; ++t) {
    for (int e : routes_[t].ids) ++count_[static_cast<size_t>(e)];
  }
  order_.clear();
  if (tokens == 1) {
    for (int e : routes_[0].ids) {
      if (std::find(order_.begin(), order_.end(), e) == order_.end()) order_.push_back(e);
    }
  } else {
    for (size_t e = 0; e < ne; ++e) {
      if (count_[e] > 0) order_.push_back(static_cast<int>(e));
    }
  }
  uint32_t running = 0;
  for (int e : order_) {
    start_[static_cast<size_t>(e)] = fill_[static_cast<size_t>(e)] = running;
    running += count_[static_cast<size_t>(e)];
  }
  pair_token_.assign(running, 0);
  pair_out_.assign(running, 0);
  for (size_t t = 0; t < tokens; ++t) {
    const Routing& r = routes_[t];
    for (size_t j = 0; j < r.ids.size(); ++j) {
      const uint32_t p = fill_[static_cast<size_t>(r.ids[j])]++;
      pair_token_[p] = static_cast<uint32_t>(t);
      pair_out_[p] = static_cast<uint32_t>(t * topk + j);
    }
  }
  SplitDecodedPairs();
}

// Per expert: the pairs of the chunks in which at least decoded_min_tokens
// tokens chose it are decoded (the kernel table says from how many it
// pays), the rest go through the tables. The decision counts one chunk's
// tokens only, never the span's, so a token's result (and which kernel computes it) is the same
// whether its chunk ran alone or in a span. Each expert's pair range is
// reordered, stably, to decoded pairs then table pairs; all_items_ holds the
// decoded items then the table items, each part in order_'s order.
bool MoeLayer::Decodes(size_t tokens) const {
  const size_t least = experts_.decoded_min_tokens();
  return least != 0 && tokens >= least;
}

void MoeLayer::SplitDecodedPairs() {
  all_items_.clear();
  items_.clear();  // the table items, appended to all_items_ below
  for (int expert : order_) {
    const size_t e = static_cast<size_t>(expert);
    const size_t first = start_[e], n = count_[e];
    size_t n_decoded = 0;
    if (Decodes(n)) {  // else no chunk has enough of its pairs either
      // Runs of pairs in one chunk (pairs are in token order), decoded runs
      // copied first, then table runs.
      const auto runs = [&](bool want_decoded, size_t out) {
        for (size_t i = first; i < first + n;) {
          const uint32_t chunk = pair_token_[i] / chunk_;
          size_t j = i;
          while (j < first + n && pair_token_[j] / chunk_ == chunk) ++j;
          if (Decodes(j - i) == want_decoded) {
            std::copy(pair_token_.begin() + i, pair_token_.begin() + j, part_token_.begin() + out);
            std::copy(pair_out_.begin() + i, pair_out_.begin() + j, part_out_.begin() + out);
            out += j - i;
          }
          i = j;
        }
        return out;
      };
      n_decoded = runs(true, first) - first;
      if (n_decoded > 0) {
        runs(false, first + n_decoded);
        std::copy(part_token_.begin() + first, part_token_.begin() + first + n, pair_token_.begin() + first);
        std::copy(part_out_.begin() + first, part_out_.begin() + first + n, pair_out_.begin() + first);
        all_items_.push_back(Item{{}, expert, first, n_decoded});
      }
    }
    if (n > n_decoded) items_.push_back(Item{{}, expert, first + n_decoded, n - n_decoded});
  }
  n_decoded_ = all_items_.size();
  all_items_.insert(all_items_.end(), items_.begin(), items_.end());
}

void MoeLayer::TableWindowItems(size_t t0, size_t t1) {
  items_.clear();
  for (size_t i = n_decoded_; i < all_items_.size(); ++i) {
    const Item& it = all_items_[i];
    const uint32_t* tok = pair_token_.data() + it.first;
    const size_t b = static_cast<size_t>(std::lower_bound(tok, tok + it.n, t0) - tok);
    const size_t e = static_cast<size_t>(std::lower_bound(tok, tok + it.n, t1) - tok);
    if (e > b) items_.push_back(Item{{}, it.expert, it.first + b, e - b});
  }
}

void MoeLayer::Combine(size_t t, bool selection_order, float* y) {
  // One expression form everywhere (MODEL.md §5.3).
  const size_t xw = static_cast<size_t>(cfg_.expert_in());
  const size_t topk = static_cast<size_t>(cfg_.moe.top_k);
  const Routing& r = routes_[t];
  const size_t k = r.ids.size();
  for (size_t j = 0; j < k; ++j) sum_order_[j] = j;
  if (!selection_order) {
    std::sort(sum_order_.begin(), sum_order_.begin() + static_cast<std::ptrdiff_t>(k),
              [&](size_t a, size_t b) { return r.ids[a] < r.ids[b]; });
  }
  std::fill(y, y + xw, 0.0f);
  for (size_t jj = 0; jj < k; ++jj) {
    const size_t j = sum_order_[jj];
    const float wj = r.weights[j];
    const float* d = outs_.data() + (t * topk + j) * xw;
    for (size_t i = 0; i < xw; ++i) y[i] += wj * d[i];
  }
}

Status MoeLayer::RunItems(const Ops& ops, ExpertCache& cache, int layer, const float* x,
                          size_t x_stride, const Pass& pass, size_t b, size_t e) {
  Status status = Status::Ok();
  if (pins_.size() < items_.size()) pins_.resize(items_.size());
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
    constexpr size_t kGroup = VqExperts::kGroup;
    const size_t xw = static_cast<size_t>(cfg_.expert_in());
    // Work units of up to kGroup tokens of one expert through the tables:
    // an expert chosen by many tokens of a chunk is shared by both threads
    // instead of keeping one busy while the other waits at the join. A
    // decoded expert is one unit that decodes its rows once for all its
    // tokens, or even parts of at most decoded_max_tokens (one decode's
    // scratch; an expert most of a chunk chose), each decoding them again.
    // The split depends on the routing alone, so results do not depend on
    // threads or the cache.
    units_.clear();
    for (size_t i = b; i < e; ++i) {
      const size_t n = items_[i].n;
      size_t part = kGroup;
      if (pass.decoded) {
        const size_t most = experts_.decoded_max_tokens();
        const size_t parts = (n + most - 1) / most;
        part = (n + parts - 1) / parts;
      }
      for (size_t g0 = 0; g0 < n; g0 += part) {
        units_.push_back({static_cast<uint32_t>(i), static_cast<uint32_t>(g0),
                          static_cast<uint32_t>(std::min(part, n - g0))});
      }
    }
    ops.ForDynamic(units_.size(), 1, [&](size_t u0, size_t u1) {
      const int worker = Ops::Worker();
      for (size_t u = u0; u < u1; ++u) {
        const Item& item = items_[units_[u].item];
        const size_t g0 = units_[u].g0, n = units_[u].n;
        if (pass.decoded) {
          experts_.ApplyDecoded(k, item.view, x, x_stride, pair_token_.data() + item.first + g0,
                                outs_.data(), xw, pair_out_.data() + item.first + g0, n, worker);
          continue;
        }
        size_t tok[kGroup] = {};
        float* outp[kGroup] = {};
        for (size_t i = 0; i < n; ++i) {
          tok[i] = pair_token_[item.first + g0 + i] - pass.table_base;
          outp[i] = outs_.data() + static_cast<size_t>(pair_out_[item.first + g0 + i]) * xw;
        }
        experts_.Apply(k, item.view, tok, n, outp, worker);
      }
    });
  }
  for (size_t i = b; i < e; ++i) pins_[i].Reset();
  return status;
}

Status MoeLayer::RunAllItems(const Ops& ops, ExpertCache& cache, int layer, const float* x,
                             size_t x_stride, const Pass& pass, size_t late_window) {
  // Resident items first, each group in its old order. Items carry their
  // pair ranges, so reordering them moves no output.
  const auto late_begin = std::stable_partition(
      items_.begin(), items_.end(), [&](const Item& it) { return cache.Ready(layer, it.expert); });
  const size_t ready = static_cast<size_t>(late_begin - items_.begin());
  const size_t window = Window(cache);
  for (size_t b = 0; b < ready; b += window) {
    WASTE_TRY(RunItems(ops, cache, layer, x, x_stride, pass, b, std::min(ready, b + window)));
  }
  const size_t late = std::clamp<size_t>(late_window, 1, window);
  for (size_t b = ready; b < items_.size(); b += late) {
    WASTE_TRY(RunItems(ops, cache, layer, x, x_stride, pass, b, std::min(items_.size(), b + late)));
  }
  return Status::Ok();
}

Status MoeLayer::Forward(const Ops& ops, const MoeWeights& w, int layer, ExpertCache& cache,
                         const float* x, size_t tokens, float* out, Prefetcher* prefetch) {
  const size_t xw = static_cast<size_t>(cfg_.expert_in());
  const size_t h = static_cast<size_t>(cfg_.hidden);
  const bool single = tokens == 1;
  experts_.Prepare(ops);
  Route(ops, w, x, tokens);
  BuildItems(tokens);
  // Every record the step needs, in the order it will be acquired: the
  // cache pins them and starts the missing reads now. A prompt step may
  // acquire a record again (one table window after another, then its
  // decoded tokens): the cache then keeps the step's records until it ends.
  cache.Hint(layer, order_, /*step_reuses=*/!single);
  const float* xe = x;
  size_t xe_stride = h;
  if (w.latent_down != nullptr) {
    ScopedPhase phase(ops.profiler(), Phase::kExperts);
    if (single) {
      ops.MatVec(*w.latent_down, x, xe_.data());
    } else {
      // Chunk by chunk: a matmul's kernel depends on its token count.
      ForEachChunk(tokens, chunk_, [&](size_t c0, size_t nc) {
        ops.MatMul(*w.latent_down, x + c0 * h, h, nc, xe_.data() + c0 * xw, xw);
      });
    }
    xe = xe_.data();
    xe_stride = xw;
  }
  // A single token's late experts one per thread at a time: each lands
  // while the others compute. A chunk's in whole windows.
  const size_t late_window = single ? static_cast<size_t>(ops.threads()) : Window(cache);
  // Gate/up tables depend only on the input and the layer's books, shared
  // by all the experts a token chose. Every record of a layer names its
  // bank's codebook base (the container refuses any other), so no record is
  // needed to pick them and the step can start on whichever experts are
  // already in memory.
  if (n_decoded_ < all_items_.size()) {
    const size_t window = experts_.table_tokens();
    for (size_t t0 = 0; t0 < tokens; t0 += window) {
      const size_t t1 = std::min(tokens, t0 + window);
      TableWindowItems(t0, t1);
      if (items_.empty()) continue;
      experts_.BuildInputTables(ops, xe + t0 * xe_stride, xe_stride, t1 - t0,
                                container_.bank(layer).codebook_base);
      WASTE_TRY(RunAllItems(ops, cache, layer, xe, xe_stride, Pass{false, t0}, late_window));
    }
  }
  // Then the decoded experts: with a cold cache, their reads (hinted with
  // the rest, in ascending id) land while the tables run.
  if (n_decoded_ > 0) {
    items_.assign(all_items_.begin(), all_items_.begin() + static_cast<std::ptrdiff_t>(n_decoded_));
    WASTE_TRY(RunAllItems(ops, cache, layer, xe, xe_stride, Pass{true, 0}, late_window));
  }
  {
    ScopedPhase phase(ops.profiler(), Phase::kExperts);
    for (size_t t = 0; t < tokens; ++t) Combine(t, single, y_.data() + t * xw);
  }
  // The next layer's guess starts its reads while the shared experts compute.
  if (single && prefetch != nullptr) prefetch->Guess(ops, layer, x, cache);
  {
    ScopedPhase phase(ops.profiler(), Phase::kShared);
    ForEachChunk(tokens, chunk_, [&](size_t c0, size_t nc) {
      shared_.Forward(ops, w.shared, x + c0 * h, nc, shared_out_.data() + c0 * h);
    });
  }
  for (size_t t = 0; t < tokens; ++t) {
    float* yt = y_.data() + t * xw;
    const float* routed = yt;
    if (w.latent_up != nullptr) {
      ScopedPhase phase(ops.profiler(), Phase::kExperts);
      if (w.latent_norm != nullptr) RmsNorm(yt, w.latent_norm, cfg_.rms_eps, xw, yt);
      ops.MatVec(*w.latent_up, yt, d_.data());
      routed = d_.data();
    }
    const float* s = shared_out_.data() + t * h;
    for (size_t i = 0; i < h; ++i) out[t * h + i] = routed[i] + s[i];
  }
  return Status::Ok();
}

}  // namespace waste
