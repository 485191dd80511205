// MLA's prompt attention as matrix products (attention_mla_chunk.cc) against
// the one-token path, on a synthetic layer whose queries are large enough
// to make each softmax peaky: past 512 cached positions the chunk form runs
// block by block, rescaling every row's running sum when a later block
// holds a larger score, and a chunk that starts off a block boundary has
// tokens that see none of the last block. Both must come out as decode does.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "container/container.h"
#include "container/model_weights.h"
#include "kernels/kernel_table.h"
#include "model/attention_mla.h"
#include "model/model_config.h"
#include "model/session_state.h"
#include "runtime/ops.h"
#include "runtime/thread_pool.h"

namespace waste {
namespace {

struct Matrix {
  std::vector<float> data;
  TensorView view;
  Matrix(int64_t rows, int64_t cols, float scale, std::mt19937& rng) : data(rows * cols) {
    std::normal_distribution<float> d(0.0f, scale);
    for (float& v : data) v = d(rng);
    view.fmt = TensorFmt::kF32;
    view.rows = rows;
    view.cols = cols;
    view.row_bytes = static_cast<size_t>(cols) * sizeof(float);
    view.data = reinterpret_cast<const uint8_t*>(data.data());
  }
};

TEST(MlaChunk, BlocksAndMaskedRowsAgreeWithOneTokenAtATime) {
  ModelConfig cfg;
  cfg.hidden = 64;
  cfg.n_layers = 1;
  cfg.attn_kind = {AttnKind::kMla};
  cfg.ffn_kind = {FfnKind::kDense};
  cfg.mla.n_heads = 4;
  cfg.mla.kv_lora_rank = 32;
  cfg.mla.qk_nope = 16;
  cfg.mla.qk_rope = 8;
  cfg.mla.v_head = 16;
  const int dq = cfg.mla.qk_nope + cfg.mla.qk_rope;
  constexpr uint32_t kCtx = 1200;
  constexpr size_t kTokens = 1100, kChunk = 128, kFirst = 5;

  std::mt19937 rng(11);
  const float hidden_scale = 1.0f / std::sqrt(static_cast<float>(cfg.hidden));
  // Queries ~8x a unit projection: scores spread over tens, so block maxima
  // differ and the rescaling matters.
  Matrix q(cfg.mla.n_heads * dq, cfg.hidden, 8.0f * hidden_scale, rng);
  Matrix kv_a(cfg.mla.kv_lora_rank + cfg.mla.qk_rope, cfg.hidden, hidden_scale, rng);
  Matrix kv_b(cfg.mla.n_heads * (cfg.mla.qk_nope + cfg.mla.v_head), cfg.mla.kv_lora_rank,
              1.0f / std::sqrt(32.0f), rng);
  Matrix o(cfg.hidden, cfg.mla.n_heads * cfg.mla.v_head, 0.25f, rng);
  const std::vector<float> ones(static_cast<size_t>(cfg.mla.kv_lora_rank), 1.0f);
  MlaWeights w;
  w.q_proj = &q.view;
  w.kv_a = &kv_a.view;
  w.kv_a_norm = ones.data();
  w.kv_b = &kv_b.view;
  w.o_proj = &o.view;

  const size_t h = static_cast<size_t>(cfg.hidden);
  std::vector<float> x(kTokens * h);
  std::normal_distribution<float> unit(0.0f, 1.0f);
  for (float& v : x) v = unit(rng);

  auto pool = ThreadPool::Create(2);
  ASSERT_TRUE(pool.has_value());
  for (kernels::Isa isa : {kernels::Isa::kBaseline, kernels::SupportedIsas().back()}) {
    Ops ops(kernels::BuildKernelTable(isa), pool->get());
    const size_t row = static_cast<size_t>(cfg.mla.kv_lora_rank + cfg.mla.qk_rope);
    MlaLayerState chunk_state, one_state;
    chunk_state.kv.resize(kCtx * row);
    one_state.kv.resize(kCtx * row);
    MlaLayer chunked(cfg, kCtx, kChunk), single(cfg, kCtx, 1);
    std::vector<float> got(kTokens * h), want(kTokens * h);

    // The first chunk after 5 tokens runs from 5 to 133, ..., one from 389
    // to 517: its tokens before 512 see nothing of the block from 512.
    chunked.Forward(ops, w, chunk_state, 0, x.data(), kFirst, got.data());
    for (size_t t0 = kFirst; t0 < kTokens; t0 += kChunk) {
      const size_t n = std::min(kChunk, kTokens - t0);
      chunked.Forward(ops, w, chunk_state, static_cast<int>(t0), x.data() + t0 * h, n,
                      got.data() + t0 * h);
    }
    for (size_t t = 0; t < kTokens; ++t) {
      single.Forward(ops, w, one_state, static_cast<int>(t), x.data() + t * h, want.data() + t * h);
    }
    float worst = 0.0f;
    for (size_t t = 0; t < kTokens; ++t) {
      float diff = 0.0f, scale = 0.0f;
      for (size_t i = 0; i < h; ++i) {
        diff = std::max(diff, std::fabs(got[t * h + i] - want[t * h + i]));
        scale = std::max(scale, std::fabs(want[t * h + i]));
      }
      worst = std::max(worst, diff / scale);
      ASSERT_LE(diff, 1e-4f * scale) << "isa " << static_cast<int>(isa) << ", position " << t;
    }
    std::printf("isa %d: worst max|d|/max|out| over %zu positions = %.3g\n", static_cast<int>(isa),
                kTokens, worst);
  }
}

}  // namespace
}  // namespace waste
