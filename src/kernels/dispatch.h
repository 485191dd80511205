// Internals of the kernel dispatch, exposed for tests: how the process-wide
// table is chosen from the CPU and the WASTE_BACKEND value, without reading
// the environment or caching, so every branch can be exercised in-process.
#pragma once

#include "kernels/kernel_table.h"

namespace waste::kernels {

// What ActiveKernels() builds when WASTE_BACKEND has the value
// `backend_env` (nullptr = unset): "cpu" -> the baseline alone; anything
// else -> the best supported ISA, then accelerators.
KernelTable BuildActiveTable(const char* backend_env);

// True when the CPU and OS can run the AVX-512 VBMI kernels (which
// BuildKernelTable(Isa::kAvx512) then includes, naming the table
// "AVX-512+VBMI").
bool CpuHasAvx512Vbmi();

// True when the CPU and OS can run the AVX-512 VNNI fixed-point Q4G matvec
// prototype (avx512_vnni::MatVecQ4GFixedPoint; not in any table).
bool CpuHasAvx512Vnni();

}  // namespace waste::kernels
