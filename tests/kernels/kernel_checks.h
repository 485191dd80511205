// Slot-by-slot comparison of one kernel table against another (an ISA
// against the baseline) on random inputs at sizes that hit every vector and
// row-block tail. Free of GoogleTest so that the aarch64 cross self-test
// (neon_selftest.cc, run under qemu) and kernel_test.cc share one set of
// checks. Inputs live in buffers that end at a PROT_NONE page, so a kernel
// that reads past its input faults instead of passing by luck.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"

namespace waste::kernels::testing {

// Tolerances, stated once. A sum of n f32 products evaluated in a different
// order (SIMD lanes, FMA) differs from the in-order sum by at most about
// n * 2^-24 of the sum of |terms|; random inputs land near sqrt(n) * 2^-24.
// 1e-5 of sum|terms| covers n = 2304 with margin and still catches any
// indexing or decoding bug (those are O(1) of a term).
inline constexpr double kSumRelTol = 1e-5;

struct CheckReport {
  int cases = 0;                      // comparisons run
  std::vector<std::string> failures;  // first few, human-readable
  int failed = 0;                     // failing cases (all, not only listed)
  void Fail(const std::string& what);
};

using SlotCheckFn = void (*)(const KernelTable& ref, const KernelTable& test, CheckReport& report);

struct SlotCheck {
  const char* slot;  // KernelTable member name
  SlotCheckFn run;
  // True when `test` has its own kernel for the slot (not the baseline's).
  bool (*overridden)(const KernelTable& ref, const KernelTable& test);
};

// Every slot of KernelTable, in declaration order.
const std::vector<SlotCheck>& AllSlotChecks();

// A matmul of fewer tokens than the packed panels take (1..11), Q4G with
// group 128 and Q8G with groups a multiple of 16 (what writers emit): each
// token's outputs must equal a matvec of that token bit for bit (the
// few-token kernels run the matvec's arithmetic). Holds for the tables that
// have those kernels (AVX-512; kernel_test.cc).
void CheckFewTokenMatMulEqualsMatVec(const KernelTable& table, CheckReport& report);

}  // namespace waste::kernels::testing
