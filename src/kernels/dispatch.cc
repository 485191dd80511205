// Kernel dispatch (ENGINE.md §3.2): the baseline fills every slot, then the
// best ISA this CPU and OS can run overwrites what it implements (unless
// WASTE_BACKEND=cpu), then compiled-in accelerators may take slots. Runs once
// per process; the table is immutable afterwards.
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "kernels/backends/backend.h"
#include "kernels/baseline.h"
#include "kernels/dispatch.h"
#include "kernels/isa_register.h"
#include "kernels/kernel_table.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <cpuid.h>

#include "cpu_features/cpuinfo_x86.h"
#endif

namespace waste::kernels {
namespace {

#if defined(__x86_64__) || defined(_M_X64)
// What the OS saves on a context switch (XCR0), read only when CPUID says
// XGETBV exists; without OSXSAVE no AVX state is usable at all. We check this
// ourselves rather than trusting any library default: a feature counts only
// if its registers survive a context switch (ENGINE.md §3.3).
uint64_t ReadXcr0() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  if ((ecx & (1u << 27)) == 0) return 0;  // OSXSAVE
  uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

struct X86Support {
  bool avx2 = false;    // AVX2 + FMA + F16C with YMM state
  bool avx512 = false;  // AVX512 F/BW/VL/DQ with ZMM state (and AVX2)
  bool vbmi = false;    // AVX512VBMI on top of avx512
  bool vnni = false;    // AVX512_VNNI on top of avx512
};

X86Support DetectX86() {
  const cpu_features::X86Features f = cpu_features::GetX86Info().features;
  const uint64_t xcr0 = ReadXcr0();
  const bool ymm = (xcr0 & 0x06) == 0x06;
  const bool zmm = ymm && (xcr0 & 0xE0) == 0xE0;
  X86Support s;
  s.avx2 = ymm && f.avx2 && f.fma3 && f.f16c;
  s.avx512 = s.avx2 && zmm && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq;
  s.vbmi = s.avx512 && f.avx512vbmi;
  s.vnni = s.avx512 && f.avx512vnni;
  return s;
}

[[maybe_unused]] const X86Support& X86() {
  static const X86Support support = DetectX86();
  return support;
}
#endif

// Accelerators compiled into this build, in order CUDA, Metal, BLAS
// (ENGINE.md §3.2 step 4): each probes its device and takes slots or
// declines (src/kernels/backends/).
void RegisterAccelerators(KernelTable& table) {
  backends::ApplyAccelerators(table, backends::CompiledAccelerators());
}

}  // namespace

const char* IsaName(Isa isa) {
  switch (isa) {
    case Isa::kBaseline:
      return "CPU";
    case Isa::kAvx2:
      return "AVX2";
    case Isa::kAvx512:
      return "AVX-512";
    case Isa::kNeon:
      return "NEON";
  }
  return "unknown";
}

bool CpuHasAvx512Vbmi() {
#if defined(WASTE_HAVE_AVX512) && (defined(__x86_64__) || defined(_M_X64))
  return X86().vbmi;
#else
  return false;
#endif
}

bool CpuHasAvx512Vnni() {
#if defined(WASTE_HAVE_AVX512) && (defined(__x86_64__) || defined(_M_X64))
  return X86().vnni;
#else
  return false;
#endif
}

std::vector<Isa> SupportedIsas() {
  std::vector<Isa> isas = {Isa::kBaseline};
#if defined(__x86_64__) || defined(_M_X64)
#if defined(WASTE_HAVE_AVX2)
  if (X86().avx2) isas.push_back(Isa::kAvx2);
#endif
#if defined(WASTE_HAVE_AVX512)
  if (X86().avx512) isas.push_back(Isa::kAvx512);
#endif
#elif defined(__aarch64__) && defined(WASTE_HAVE_NEON)
  isas.push_back(Isa::kNeon);  // Advanced SIMD is part of every AArch64 CPU
#endif
  return isas;
}

KernelTable BuildKernelTable(Isa isa) {
  KernelTable table;
  baseline::RegisterBaseline(table);
  bool supported = false;
  for (Isa s : SupportedIsas()) supported |= (s == isa);
  if (!supported) return table;  // precondition broken: stay correct, not fast
  switch (isa) {
    case Isa::kBaseline:
      break;
    case Isa::kAvx2:
#if defined(WASTE_HAVE_AVX2)
      avx2::RegisterAvx2(table);
#endif
      break;
    case Isa::kAvx512:
#if defined(WASTE_HAVE_AVX512)
      // Every AVX-512 CPU runs AVX2: its kernels fill the slots AVX-512 lacks.
      avx2::RegisterAvx2(table);
      avx512::RegisterAvx512(table);
      if (CpuHasAvx512Vbmi()) avx512_vbmi::RegisterAvx512Vbmi(table);
#endif
      break;
    case Isa::kNeon:
#if defined(WASTE_HAVE_NEON)
      neon::RegisterNeon(table);
#endif
      break;
  }
  return table;
}

KernelTable BuildActiveTable(const char* backend_env) {
  if (backend_env != nullptr && std::strcmp(backend_env, "cpu") == 0) {
    return BuildKernelTable(Isa::kBaseline);  // numeric bisection: no SIMD, no device
  }
  KernelTable table = BuildKernelTable(SupportedIsas().back());
  RegisterAccelerators(table);
  return table;
}

const KernelTable& ActiveKernels() {
  // Per process, resolved once: WASTE_BACKEND=cpu forces the baseline. The
  // one getenv outside src/base: the kernel layer builds and is tested on
  // its own (also cross-compiled for aarch64), without the base library.
  static const KernelTable table = BuildActiveTable(std::getenv("WASTE_BACKEND"));
  return table;
}

const KernelTable& BaselineKernels() {
  static const KernelTable table = BuildKernelTable(Isa::kBaseline);
  return table;
}

}  // namespace waste::kernels
