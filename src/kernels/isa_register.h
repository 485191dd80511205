// Registration entry points of the per-ISA kernel files. Each overwrites only
// the slots it implements and appends to nothing else; dispatch.cc calls them
// after checking the CPU and OS. On an architecture a file does not target
// its function still exists and does nothing, so every build links.
#pragma once

#include "kernels/kernel_table.h"

namespace waste::kernels {

namespace avx2 {
void RegisterAvx2(KernelTable& table);  // needs AVX2 + FMA + F16C, OS YMM state
}  // namespace avx2

namespace avx512 {
void RegisterAvx512(KernelTable& table);  // needs AVX512F/BW/VL/DQ, OS ZMM state
// The float Q4G matvec RegisterAvx512 installs, by name: the VNNI prototype
// hands it the shapes and inputs it does not take.
void MatVecQ4GFloat(const MatVecArgs& args, size_t row_begin, size_t row_end);
}  // namespace avx512

namespace avx512_vbmi {
// On top of RegisterAvx512; needs AVX512VBMI. Sets the "+VBMI" name suffix.
void RegisterAvx512Vbmi(KernelTable& table);
}  // namespace avx512_vbmi

namespace avx512_vnni {
// The fixed-point Q4G matvec prototype (vpdpbusd); needs AVX512_VNNI
// (CpuHasAvx512Vnni). Not registered: no faster from DRAM on the
// development machine (avx512_vnni.cc); benchmarks and tests call it.
void MatVecQ4GFixedPoint(const MatVecArgs& args, size_t row_begin, size_t row_end);
}  // namespace avx512_vnni

namespace neon {
void RegisterNeon(KernelTable& table);  // aarch64: Advanced SIMD is mandatory
}  // namespace neon

}  // namespace waste::kernels
