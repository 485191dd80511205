// The kernel dispatch table: one struct of function pointers, filled with the
// portable baseline (always complete, always correct), then partially
// overwritten by the best ISA the CPU and OS support, then by accelerators.
// Resolved once (ActiveKernels()); immutable afterwards. Callers take a
// `const KernelTable&` once per forward call, never per element.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/kernel_args.h"

namespace waste::kernels {

using DotF32Fn = float (*)(const float* a, const float* b, size_t n);
using AxpyF32Fn = void (*)(float a, const float* x, float* y, size_t n);  // y += a*x
using MatVecFn = void (*)(const MatVecArgs& args, size_t row_begin, size_t row_end);
using MatMulFn = void (*)(const MatMulArgs& args, size_t row_begin, size_t row_end);
using DequantFn = void (*)(const DequantArgs& args, size_t row_begin, size_t row_end);
using LutBuildFn = void (*)(const LutBuildArgs& args, size_t v_begin, size_t v_end);
using VqApply8Fn = void (*)(const VqApply8Args& args, size_t row_begin, size_t row_end);
using VqMatMul8Fn = void (*)(const VqMatMul8Args& args, size_t row_begin, size_t row_end);
using VqApply6Fn = void (*)(const VqApply6Args& args, size_t row_begin, size_t row_end);
using LutQuantizeFn = void (*)(const LutQuantizeArgs& args, size_t block_begin, size_t block_end);
using KdaStepFn = void (*)(const KdaStepArgs& args, size_t head_begin, size_t head_end);

struct KernelTable {
  DotF32Fn dot_f32 = nullptr;
  AxpyF32Fn axpy_f32 = nullptr;
  MatVecFn matvec_f32 = nullptr;
  MatVecFn matvec_q8g = nullptr;
  MatVecFn matvec_q4g = nullptr;
  MatVecFn matvec_q3g = nullptr;
  MatMulFn matmul_f32 = nullptr;
  MatMulFn matmul_q8g = nullptr;
  MatMulFn matmul_q4g = nullptr;
  MatMulFn matmul_q3g = nullptr;
  DequantFn dequant_q8g = nullptr;
  DequantFn dequant_q4g = nullptr;
  DequantFn dequant_q3g = nullptr;
  LutBuildFn lut_build = nullptr;
  VqApply8Fn vq_apply8 = nullptr;
  VqMatMul8Fn vq_matmul8 = nullptr;
  VqApply6Fn vq_apply6 = nullptr;
  LutQuantizeFn lut_quantize = nullptr;
  KdaStepFn kda_step = nullptr;

  bool on_device = false;  // accelerator wants whole ranges (no thread split)
  // vq_apply8 runs fastest on byte-plane tables (LutBuildArgs::planes);
  // callers may build those instead of f32 tables. Results are identical.
  bool vq8_planes = false;
  // An expert chosen by this many tokens of a prompt chunk or more is
  // applied with vq_matmul8 (rows decoded once for all of them) instead of
  // vq_apply8 per token; 0 = never. Set by tables whose vq_matmul8 beats
  // that many table applies (kernels_bench: vq_matmul8_* vs
  // vq_apply8_vq3r_planes_chunk*).
  size_t vq_decoded_min_tokens = 0;
  // Contract of every multi-input kernel (matmuls, vq_apply8, vq_matmul8):
  // one input's outputs do not depend on the other inputs of the call, their
  // number or their order (the MoE's table windows and prompt spans batch
  // tokens differently from one chunk alone and rely on it; a matmul may
  // still pick its kernel by token count, so callers keep those per chunk).
  std::string name = "CPU";  // what the binary uses: CPU, AVX2, AVX-512(+VBMI)...
};

enum class Isa { kBaseline, kAvx2, kAvx512, kNeon };

const char* IsaName(Isa isa);

// ISAs this build contains and this CPU + OS can execute, best last.
std::vector<Isa> SupportedIsas();

// A table for exactly `isa` on top of the baseline (tests use this to pair
// every ISA's kernels with the baseline). Precondition: isa is supported.
KernelTable BuildKernelTable(Isa isa);

// The process-wide table: baseline, then the best supported ISA unless
// WASTE_BACKEND=cpu, then compiled-in accelerators that accept.
const KernelTable& ActiveKernels();

// The process-wide baseline-only table (name "CPU"), for callers that force
// the portable kernels per model (Config::force_baseline_kernels).
const KernelTable& BaselineKernels();

}  // namespace waste::kernels
