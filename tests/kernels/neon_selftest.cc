// Self-contained NEON-vs-baseline driver for the aarch64 cross build
// (tools/cross/aarch64_kernel_tests.sh): no GoogleTest, no cpu_features, no
// dispatch.cc — it pairs the two tables directly and runs the same checks as
// kernel_test.cc for every slot NEON implements. Prints "N passed, M failed"
// and exits non-zero on any failure.
#include <cstdio>

#include "kernels/baseline.h"
#include "kernels/isa_register.h"
#include "kernels/kernel_checks.h"
#include "kernels/kernel_table.h"

int main() {
  using namespace waste::kernels;
  KernelTable ref;
  baseline::RegisterBaseline(ref);
  KernelTable neon = ref;
  neon::RegisterNeon(neon);
  std::printf("table: %s\n", neon.name.c_str());
  int passed = 0, failed = 0;
  for (const testing::SlotCheck& check : testing::AllSlotChecks()) {
    if (!check.overridden(ref, neon)) {
      std::printf("SKIP %-13s (no NEON kernel; the baseline runs)\n", check.slot);
      continue;
    }
    testing::CheckReport report;
    check.run(ref, neon, report);
    const bool ok = report.failed == 0 && report.cases > 0;
    std::printf("%s %-13s %d cases\n", ok ? "PASS" : "FAIL", check.slot, report.cases);
    for (const std::string& f : report.failures) std::printf("     %s\n", f.c_str());
    (ok ? passed : failed) += 1;
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return (failed == 0 && passed > 0) ? 0 : 1;
}
