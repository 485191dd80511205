#include "model/vq_experts.h"

#include <algorithm>

#include "model/ffn.h"

namespace waste {
namespace {

constexpr size_t kTauBlock = 32;    // VQ4P: one int8 scale per 32 vector positions
constexpr size_t kTableChunk = 32;  // vector positions per table-build task (a tau block)

}  // namespace

VqExperts::VqExperts(const Container& container, size_t max_tokens)
    : container_(container),
      cfg_(container.config()),
      table_tokens_(std::clamp(max_tokens, kGroup, kTableTokens)),
      six_bit_(container.config().quant.index_bits == 6) {
  const ModelConfig& c = cfg_;
  const size_t vd = static_cast<size_t>(c.quant.vec_dim);
  const size_t per_v = static_cast<size_t>(c.quant.stages * c.quant.entries);
  const size_t x = static_cast<size_t>(c.expert_in());
  const size_t mid = static_cast<size_t>(c.moe.inter);
  nv_in_ = x / vd;
  nv_mid_ = mid / vd;
  table_in_ = nv_in_ * per_v;
  table_mid_ = nv_mid_ * per_v;
  tau_in_ = (nv_in_ + kTauBlock - 1) / kTauBlock;
  tau_mid_ = (nv_mid_ + kTauBlock - 1) / kTauBlock;
  tables_.resize(2 * table_tokens_ * table_in_);
  if (six_bit_) {
    qtables_.resize(2 * table_tokens_ * table_in_);
    taus_.resize(2 * table_tokens_ * tau_in_);
  }
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

uint64_t VqExperts::scratch_bytes() const {
  const uint64_t shared =
      (books_t_.size() + tables_.size() + taus_.size()) * sizeof(float) + qtables_.size();
  const size_t mid = static_cast<size_t>(cfg_.moe.inter);
  const size_t gu_tokens = ScratchTokens();
  const uint64_t per_thread =
      (2 * gu_tokens * mid + kGroup * table_mid_ + kGroup * tau_mid_) * sizeof(float) +
      (six_bit_ ? kGroup * table_mid_ : 0);
  return shared + per_thread * std::max<size_t>(1, scratch_.size());
}

void VqExperts::Prepare(const Ops& ops) {
  planes_ = ops.k().vq8_planes && !six_bit_;
  const bool decodable = !six_bit_ && cfg_.quant.stages <= 8 && cfg_.quant.vec_dim == 8;
  decoded_min_tokens_ = decodable ? ops.k().vq_decoded_min_tokens : 0;
  const size_t threads = static_cast<size_t>(ops.threads());
  if (scratch_.size() >= threads) return;
  const size_t mid = static_cast<size_t>(cfg_.moe.inter);
  scratch_.resize(threads);
  const size_t gu_tokens = ScratchTokens();
  for (Scratch& s : scratch_) {
    s.g.resize(gu_tokens * mid);
    s.u.resize(gu_tokens * mid);
    s.g_rows.resize(gu_tokens);
    s.u_rows.resize(gu_tokens);
    s.x_rows.resize(gu_tokens);
    s.out_rows.resize(gu_tokens);
    for (size_t i = 0; i < gu_tokens; ++i) {
      s.g_rows[i] = s.g.data() + i * mid;
      s.u_rows[i] = s.u.data() + i * mid;
    }
    s.table_mid.resize(kGroup * table_mid_);
    if (six_bit_) {
      s.q_mid.resize(kGroup * table_mid_);
      s.tau_mid.resize(kGroup * tau_mid_);
    }
  }
}

void VqExperts::BuildTable(const kernels::KernelTable& k, const float* x, size_t n, int book_base,
                           float* table, int8_t* qtable, float* tau, size_t v_begin,
                           size_t v_end) const {
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

void VqExperts::BuildInputTables(const Ops& ops, const float* x, size_t x_stride, size_t tokens,
                                 int book_base) {
  ScopedPhase phase(ops.profiler(), Phase::kLutBuild);
  tokens = std::min(tokens, table_tokens_);  // callers window longer chunks (MoeLayer)
  const size_t chunks = (nv_in_ + kTableChunk - 1) / kTableChunk;
  const size_t units = tokens * 2 * chunks;
  const size_t xw = static_cast<size_t>(cfg_.expert_in());
  const kernels::KernelTable& k = ops.k();
  const size_t per_task = std::max<size_t>(1, units / (4 * static_cast<size_t>(ops.threads())));
  ops.ForDynamic(units, per_task, [&](size_t b, size_t e) {
    for (size_t u = b; u < e; ++u) {
      const size_t t = u / (2 * chunks), which = (u / chunks) % 2, c = u % chunks;
      const int w = static_cast<int>(which);
      const int base = book_base + w * cfg_.quant.stages;
      BuildTable(k, x + t * x_stride, xw, base, TableIn(t, w), QTableIn(t, w), TauIn(t, w),
                 c * kTableChunk, std::min(nv_in_, (c + 1) * kTableChunk));
    }
  });
}

void VqExperts::Apply(const kernels::KernelTable& k, const ExpertRecordView& rec,
                      const size_t* tokens, size_t n, float* const* outs, int worker) {
  Scratch& s = scratch_[static_cast<size_t>(worker)];
  const size_t mid = static_cast<size_t>(cfg_.moe.inter);
  const size_t xw = static_cast<size_t>(cfg_.expert_in());
  const int down_base = rec.codebook_id + 2 * cfg_.quant.stages;
  float* gp[kGroup] = {};
  float* up[kGroup] = {};
  for (size_t i = 0; i < n; ++i) {
    gp[i] = s.g.data() + i * mid;
    up[i] = s.u.data() + i * mid;
  }
  // Gate and up from the tokens' shared input tables.
  if (six_bit_) {
    for (size_t i = 0; i < n; ++i) {
      Apply6(k, rec.gate, rec.scale_gate, nv_in_, QTableIn(tokens[i], 0), TauIn(tokens[i], 0),
             gp[i], mid);
      Apply6(k, rec.up, rec.scale_up, nv_in_, QTableIn(tokens[i], 1), TauIn(tokens[i], 1),
             up[i], mid);
    }
  } else {
    const float* tabs[kGroup] = {};
    for (size_t i = 0; i < n; ++i) tabs[i] = TableIn(tokens[i], 0);
    Apply8(k, rec.gate, rec.scale_gate, nv_in_, tabs, n, gp, mid);
    for (size_t i = 0; i < n; ++i) tabs[i] = TableIn(tokens[i], 1);
    Apply8(k, rec.up, rec.scale_up, nv_in_, tabs, n, up, mid);
  }
  // The activation, then each token's own down table.
  for (size_t i = 0; i < n; ++i) {
    GatedActivation(cfg_, gp[i], up[i], mid);
    BuildTable(k, gp[i], mid, down_base, s.table_mid.data() + i * table_mid_,
               six_bit_ ? s.q_mid.data() + i * table_mid_ : nullptr,
               six_bit_ ? s.tau_mid.data() + i * tau_mid_ : nullptr, 0, nv_mid_);
  }
  if (six_bit_) {
    for (size_t i = 0; i < n; ++i) {
      Apply6(k, rec.down, rec.scale_down, nv_mid_, s.q_mid.data() + i * table_mid_,
             s.tau_mid.data() + i * tau_mid_, outs[i], xw);
    }
  } else {
    const float* tabs[kGroup] = {};
    for (size_t i = 0; i < n; ++i) tabs[i] = s.table_mid.data() + i * table_mid_;
    Apply8(k, rec.down, rec.scale_down, nv_mid_, tabs, n, outs, xw);
  }
}

void VqExperts::ApplyDecoded(const kernels::KernelTable& k, const ExpertRecordView& rec,
                             const float* x, size_t x_stride, const uint32_t* tokens, float* out,
                             size_t out_stride, const uint32_t* slots, size_t n, int worker) {
  Scratch& s = scratch_[static_cast<size_t>(worker)];
  const size_t mid = static_cast<size_t>(cfg_.moe.inter);
  const size_t xw = static_cast<size_t>(cfg_.expert_in());
  for (size_t i = 0; i < n; ++i) {
    s.x_rows[i] = x + tokens[i] * x_stride;
    s.out_rows[i] = out + slots[i] * out_stride;
  }
  const float* const* xs = s.x_rows.data();
  float* const* outs = s.out_rows.data();
  const int stages = cfg_.quant.stages;
  float* const* gp = s.g_rows.data();
  float* const* up = s.u_rows.data();
  const float* books[8];
  kernels::VqMatMul8Args a;
  a.stages = static_cast<size_t>(stages);
  a.entries = static_cast<size_t>(cfg_.quant.entries);
  a.vec_dim = static_cast<size_t>(cfg_.quant.vec_dim);
  a.books = books;
  a.count = n;
  // Matrix m (gate 0, up 1, down 2) uses books codebook_id + m * stages + s.
  auto run = [&](int m, const uint8_t* indices, const uint16_t* scales, size_t nv,
                 const float* const* in, float* const* out, size_t rows) {
    for (int st = 0; st < stages; ++st) books[st] = container_.Codebook(rec.codebook_id + m * stages + st);
    a.indices = indices;
    a.scales = scales;
    a.nv = nv;
    a.xs = in;
    a.ys = out;
    k.vq_matmul8(a, 0, rows);
  };
  run(0, rec.gate, rec.scale_gate, nv_in_, xs, gp, mid);
  run(1, rec.up, rec.scale_up, nv_in_, xs, up, mid);
  for (size_t i = 0; i < n; ++i) GatedActivation(cfg_, gp[i], up[i], mid);
  run(2, rec.down, rec.scale_down, nv_mid_, gp, outs, xw);
}

void VqExperts::Apply8(const kernels::KernelTable& k, const uint8_t* indices,
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

void VqExperts::Apply6(const kernels::KernelTable& k, const uint8_t* indices,
                       const uint16_t* scales, size_t nv, const int8_t* qtable, const float* tau,
                       float* y, size_t rows) const {
  kernels::VqApply6Args a;
  a.indices = indices;
  a.nv = nv;
  a.table = qtable;
  a.tau = tau;
  a.scales = scales;
  a.y = y;
  k.vq_apply6(a, 0, rows);
}

}  // namespace waste
