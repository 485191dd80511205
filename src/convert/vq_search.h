// Nearest-entry search kernels behind BookSearch (vq.h). A kernel scans a
// codebook with the expanded score ||c||^2 - 2 x.c (||x||^2 is the same for
// every entry, so it is left out) and reports, per vector, the entry with
// the lowest score, that score and the second lowest score. BookSearch then
// proves the pick against the exact distance or rescans exactly (vq.cc), so
// which kernel ran never changes the answer. One kernel is chosen per
// process (ChosenSearchKernel); tests and benchmarks may name another.
//
// Kept in src/convert rather than the engine's kernel table: the engine
// never searches codebooks (it only decodes indices), so the table and
// waste_core stay free of a converter-only entry.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace waste::convert {

// t: entries transposed, [8][n]; norm: ||c||^2 per entry; x: count vectors
// of 8 floats. Writes idx/best/second per vector. A kernel that packs the
// block number into the low mantissa bits of its scores (to keep the running
// minimum in one register) reports the packed values: they are within
// 2^pack_bits ulp of the computed score, which BookSearch's margin covers.
using SearchScanFn = void (*)(const float* t, const float* norm, int n, const float* x,
                              int count, int32_t* idx, float* best, float* second);

struct SearchKernel {
  const char* name;
  int lanes;        // entries per step: the kernel runs only when n is a multiple
  bool packs_block; // scores carry ceil(log2(n / lanes)) bits of block number
  int max_blocks;   // largest n / lanes it accepts
  SearchScanFn scan;
};

// The kernels this build has and this CPU runs, portable first, best last.
std::vector<const SearchKernel*> SupportedSearchKernels();

// The process's choice, made once: the best supported kernel, the portable
// one when WASTE_BACKEND=cpu (as the engine's kernel table), or the one
// WASTE_CONVERT_SEARCH names (portable, avx2, avx512) if supported.
const SearchKernel* ChosenSearchKernel();

// The portable kernel (any n); also the fallback of the others.
const SearchKernel* PortableSearchKernel();

}  // namespace waste::convert
