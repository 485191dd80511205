// Weight handles of the model, one slot per tensor of the tensor list
// (container/tensor_list.cc binds each spec to its slot here). Plain data:
// pointers owned by the Container, valid as long as it lives.
#pragma once

#include <vector>

#include "container/container.h"

namespace waste {

struct KdaWeights {
  const TensorView *q_proj = nullptr, *k_proj = nullptr, *v_proj = nullptr;
  const float *q_conv = nullptr, *k_conv = nullptr, *v_conv = nullptr;  // [C][Kc]
  const TensorView *f_a = nullptr, *f_b = nullptr, *b_proj = nullptr;
  const float *a_log = nullptr, *dt_bias = nullptr;
  const TensorView *g_proj = nullptr;                 // full-rank gate, or
  const TensorView *g_a = nullptr, *g_b = nullptr;    // low-rank gate
  const float* o_norm = nullptr;
  const TensorView* o_proj = nullptr;
};

struct MlaWeights {
  const TensorView* q_proj = nullptr;                 // when mla.query == kFull
  const TensorView *q_a = nullptr, *q_b = nullptr;
  const float* q_a_norm = nullptr;
  const TensorView* kv_a = nullptr;
  const float* kv_a_norm = nullptr;
  const TensorView* kv_b = nullptr;
  const TensorView* g_proj = nullptr;                 // output gate (optional)
  const TensorView* o_proj = nullptr;
};

struct MlpWeights {                                   // dense FFN or shared experts
  const TensorView *gate = nullptr, *up = nullptr, *down = nullptr;
};

struct MoeWeights {
  const TensorView* router = nullptr;
  const float* router_bias = nullptr;                 // may be null
  MlpWeights shared;
  const TensorView *latent_down = nullptr, *latent_up = nullptr;
  const float* latent_norm = nullptr;
};

struct AttnResWeights {
  const float *attn_norm = nullptr, *attn_proj = nullptr;
  const float *mlp_norm = nullptr, *mlp_proj = nullptr;
};

struct LayerWeights {
  const float* input_norm = nullptr;
  const float* post_attn_norm = nullptr;
  KdaWeights kda;
  MlaWeights mla;
  MlpWeights dense;
  MoeWeights moe;
  AttnResWeights attn_res;
};

struct ModelWeights {
  const TensorView* embed = nullptr;
  const float* final_norm = nullptr;
  const TensorView* lm_head = nullptr;
  const float *out_res_norm = nullptr, *out_res_proj = nullptr;
  std::vector<LayerWeights> layers;
};

}  // namespace waste
