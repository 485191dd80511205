// MLA attention for a prompt chunk as matrix products (attention_mla.h).
//
// Token-at-a-time attention reads every cached row once per (token, head)
// and reduces each score with a horizontal sum; at a 1024-token context that
// was most of MLA's prefill time. Here the absorbed queries of all
// (token, head) pairs of a head group are the inputs of one product against
// a block of cache rows (the trunk's f32 matmul: each row of the block is
// packed once and used by every pair), and the weighted sum of latent rows
// is a second product against the same block transposed. The softmax runs
// block by block with each pair's running maximum and sum (the "online"
// form), so the buffers do not grow with the context.
//
// The result is the same attention rounded differently (max-subtraction per
// block, other summation order): MODEL.md §9 allows it for chunks, whose
// logits must stay within §7's tolerance of token-at-a-time (the oracle and
// chunking tests check it). It depends only on the chunk's tokens and the
// cache, never on the thread count.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/attention_mla.h"

namespace waste {
namespace {

// An f32 matrix in memory as the weight operand of Ops::MatMul.
TensorView F32Matrix(const float* data, size_t rows, size_t cols, size_t stride) {
  TensorView v;
  v.fmt = TensorFmt::kF32;
  v.rows = static_cast<int64_t>(rows);
  v.cols = static_cast<int64_t>(cols);
  v.row_bytes = stride * sizeof(float);
  v.data = reinterpret_cast<const uint8_t*>(data);
  return v;
}

}  // namespace

void MlaLayer::AttendChunk(const Ops& ops, const MlaWeights& w, const MlaLayerState& state, int pos0,
                           size_t n) {
  const size_t heads = static_cast<size_t>(cfg_.mla.n_heads);
  const size_t dn = static_cast<size_t>(cfg_.mla.qk_nope), dr = static_cast<size_t>(cfg_.mla.qk_rope);
  const size_t dv = static_cast<size_t>(cfg_.mla.v_head), dq = dn + dr;
  const size_t R = static_cast<size_t>(cfg_.mla.kv_lora_rank), width = R + dr;
  const size_t qw = heads * dq, ow = heads * dv;
  const size_t B = kChunkBlock;
  const float scale = cfg_.rope.att_mul / std::sqrt(static_cast<float>(dq));
  const kernels::KernelTable& k = ops.k();
  const TensorView& kvb = *w.kv_b;
  const size_t group = ChunkRows(cfg_, max_tokens_) / max_tokens_;  // heads per product
  const size_t nk = static_cast<size_t>(pos0) + n;                   // cached rows, chunk included
  PrepareThreadScratch(ops);
  float* const qa = chunk_q_.data();
  float* const p = chunk_p_.data();
  float* const acc = chunk_acc_.data();
  float* const tmp = chunk_tmp_.data();
  float* const ct = chunk_ct_.data();

  for (size_t h0 = 0; h0 < heads; h0 += group) {
    const size_t g = std::min(group, heads - h0);
    const size_t rows = n * g;  // row t * g + (h - h0): token t, head h

    // Absorbed queries [W_kb,hᵀ q_nope | q_rope], W_kb,h dequantised once per head.
    ops.ForDynamic(g, 1, [&](size_t hb, size_t he) {
      float* wk = thread_scratch_[static_cast<size_t>(Ops::Worker())].data();
      for (size_t hl = hb; hl < he; ++hl) {
        const size_t h = h0 + hl;
        DequantKvbRows(k, kvb, static_cast<int64_t>(h * (dn + dv)), static_cast<int>(dn), wk);
        for (size_t t = 0; t < n; ++t) {
          const float* qh = q_.data() + t * qw + h * dq;
          float* xq = qa + (t * g + hl) * width;
          std::memset(xq, 0, R * sizeof(float));
          for (size_t i = 0; i < dn; ++i) {
            if (qh[i] != 0.0f) k.axpy_f32(qh[i], wk + i * R, xq, R);
          }
          std::memcpy(xq + R, qh + dn, dr * sizeof(float));
        }
      }
    });
    std::fill_n(chunk_max_.data(), rows, -INFINITY);
    std::fill_n(chunk_sum_.data(), rows, 0.0f);

    for (size_t s0 = 0; s0 < nk; s0 += B) {
      const size_t bn = std::min(B, nk - s0);
      const float* block = state.kv.data() + s0 * width;
      // Scores of every pair against the block's rows.
      ops.MatMul(F32Matrix(block, bn, width, width), qa, width, rows, p, B);
      // The block's latent columns transposed: ct[d][j] = block[j][d].
      ops.For(R, 16, [&](size_t d0, size_t d1) {
        for (size_t j = 0; j < bn; ++j) {
          const float* src = block + j * width;
          for (size_t d = d0; d < d1; ++d) ct[d * B + j] = src[d];
        }
      });
      // Softmax weights against the running maximum; positions after the
      // token's own are masked (weight 0).
      ops.For(rows, 16, [&](size_t rb, size_t re) {
        for (size_t row = rb; row < re; ++row) {
          const size_t last = static_cast<size_t>(pos0) + row / g;  // the token's position
          const size_t valid = last < s0 ? 0 : std::min(bn, last + 1 - s0);
          float* pr = p + row * B;
          float m = chunk_max_[row];
          for (size_t j = 0; j < valid; ++j) {
            pr[j] *= scale;
            m = std::max(m, pr[j]);
          }
          // exp(-inf) = 0 on the first block: nothing accumulated yet.
          const float alpha = valid == 0 ? 1.0f : std::exp(chunk_max_[row] - m);
          float sum = 0.0f;
          for (size_t j = 0; j < valid; ++j) {
            pr[j] = std::exp(pr[j] - m);
            sum += pr[j];
          }
          std::fill(pr + valid, pr + bn, 0.0f);
          chunk_max_[row] = m;
          chunk_sum_[row] = chunk_sum_[row] * alpha + sum;
          chunk_alpha_[row] = alpha;
        }
      });
      // The block's weighted latent rows, folded into the running sums.
      ops.MatMul(F32Matrix(ct, R, bn, B), p, B, rows, tmp, R);
      ops.For(rows, 16, [&](size_t rb, size_t re) {
        for (size_t row = rb; row < re; ++row) {
          float* a = acc + row * R;
          const float* b = tmp + row * R;
          if (s0 == 0) {
            std::memcpy(a, b, R * sizeof(float));
          } else {
            const float alpha = chunk_alpha_[row];
            for (size_t d = 0; d < R; ++d) a[d] = a[d] * alpha + b[d];
          }
        }
      });
    }
    ops.For(rows, 16, [&](size_t rb, size_t re) {
      for (size_t row = rb; row < re; ++row) {
        const float inv = 1.0f / chunk_sum_[row];
        float* a = acc + row * R;
        for (size_t d = 0; d < R; ++d) a[d] *= inv;
      }
    });
    // o_h = W_vb,h · c̄ for every token: rows [h(dn+dv)+dn, +dv) of kv_b,
    // eight heads per parallel region.
    for (size_t hl0 = 0; hl0 < g; hl0 += Ops::kMaxJobs) {
      TensorView views[Ops::kMaxJobs];
      Ops::MatMulJob jobs[Ops::kMaxJobs] = {};
      for (size_t j = 0; j < Ops::kMaxJobs && hl0 + j < g; ++j) {
        const size_t hl = hl0 + j, h = h0 + hl;
        views[j] = RowSlice(kvb, static_cast<int64_t>(h * (dn + dv) + dn), static_cast<int64_t>(dv));
        jobs[j] = {&views[j], acc + hl * R, g * R, o_.data() + h * dv, ow};
      }
      ops.MatMuls(n, jobs);
    }
  }
}

}  // namespace waste
