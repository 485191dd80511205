// The portable baseline kernels: plain C++, always built, complete (every
// slot of KernelTable) and the numerical reference the ISA files are tested
// against (MODEL.md §6). ISA files may call these for shapes their fast
// paths do not cover.
#pragma once

#include <cstddef>

#include "kernels/kernel_args.h"
#include "kernels/kernel_table.h"

namespace waste::kernels::baseline {

float DotF32(const float* a, const float* b, size_t n);
void AxpyF32(float a, const float* x, float* y, size_t n);
void MatVecF32(const MatVecArgs& args, size_t row_begin, size_t row_end);
void MatVecQ8G(const MatVecArgs& args, size_t row_begin, size_t row_end);
void MatVecQ4G(const MatVecArgs& args, size_t row_begin, size_t row_end);
void MatVecQ3G(const MatVecArgs& args, size_t row_begin, size_t row_end);
void MatMulF32(const MatMulArgs& args, size_t row_begin, size_t row_end);
void MatMulQ8G(const MatMulArgs& args, size_t row_begin, size_t row_end);
void MatMulQ4G(const MatMulArgs& args, size_t row_begin, size_t row_end);
void MatMulQ3G(const MatMulArgs& args, size_t row_begin, size_t row_end);
void DequantQ8G(const DequantArgs& args, size_t row_begin, size_t row_end);
void DequantQ4G(const DequantArgs& args, size_t row_begin, size_t row_end);
void DequantQ3G(const DequantArgs& args, size_t row_begin, size_t row_end);
void LutBuild(const LutBuildArgs& args, size_t v_begin, size_t v_end);
void VqApply8(const VqApply8Args& args, size_t row_begin, size_t row_end);
void VqMatMul8(const VqMatMul8Args& args, size_t row_begin, size_t row_end);
void VqApply6(const VqApply6Args& args, size_t row_begin, size_t row_end);
void LutQuantize(const LutQuantizeArgs& args, size_t block_begin, size_t block_end);
void KdaStep(const KdaStepArgs& args, size_t head_begin, size_t head_end);

// Shared by the ISA lut_builds (plain code, no ISA flags needed).
// Their stack bound: books of at most this many floats (3 x 256 x 8 fits).
inline constexpr size_t kLutMaxBookFloats = 8192;
// Per stage, the books as [t][entry]: the caller's books_t, or `a.books`
// transposed into `scratch` (stages * 8 * entries floats).
void TransposedBooks(const LutBuildArgs& a, float* scratch, const float** out);
// Byte planes from a lut_build that writes only f32: one vector position at
// a time through a stack table, then its bytes scattered into a.planes (the
// engine asks for planes only from tables with vq8_planes; this keeps every
// lut_build complete). Needs stages * entries <= kLutMaxBookFloats / 8.
void LutBuildPlanesVia(LutBuildFn f32_build, const LutBuildArgs& a, size_t v_begin, size_t v_end);

// Fills every slot with the functions above and names the table "CPU".
void RegisterBaseline(KernelTable& table);

// Name setters for the ISA files, defined here so that no std::string code
// is ever compiled with ISA flags (an out-of-line copy of an inline string
// member built with -mavx512f could be the one the linker keeps).
void SetTableName(KernelTable& table, const char* name);
void AppendTableName(KernelTable& table, const char* suffix);

}  // namespace waste::kernels::baseline
