// Every ISA this machine runs, slot by slot, against the portable baseline
// (tests/kernels/kernel_checks.cc has the sizes and tolerances), plus which
// backend the dispatcher selects and how WASTE_BACKEND changes it.
#include <cstdlib>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/dispatch.h"
#include "kernels/kernel_checks.h"
#include "kernels/kernel_table.h"

#if defined(__x86_64__)
#include "cpu_features/cpuinfo_x86.h"
#endif

namespace waste::kernels {
namespace {

struct IsaSlot {
  Isa isa;
  size_t slot;  // index into testing::AllSlotChecks()
};

std::vector<IsaSlot> AllIsaSlots() {
  std::vector<IsaSlot> out;
  for (Isa isa : SupportedIsas()) {
    for (size_t s = 0; s < testing::AllSlotChecks().size(); ++s) out.push_back({isa, s});
  }
  return out;
}

std::string IsaSlotName(const ::testing::TestParamInfo<IsaSlot>& info) {
  std::string name = IsaName(info.param.isa);
  for (char& c : name) {
    if (c == '-' || c == '+') c = '_';
  }
  return name + "_" + testing::AllSlotChecks()[info.param.slot].slot;
}

// Readable parameter values in ctest names and failure messages.
void PrintTo(const IsaSlot& p, std::ostream* os) {
  *os << IsaName(p.isa) << " " << testing::AllSlotChecks()[p.slot].slot;
}

class KernelVsBaseline : public ::testing::TestWithParam<IsaSlot> {};

TEST_P(KernelVsBaseline, MatchesBaseline) {
  const testing::SlotCheck& check = testing::AllSlotChecks()[GetParam().slot];
  const KernelTable ref = BuildKernelTable(Isa::kBaseline);
  const KernelTable test = BuildKernelTable(GetParam().isa);
  if (!check.overridden(ref, test)) {
    GTEST_SKIP() << test.name << " has no kernel of its own for " << check.slot
                 << " (it runs the baseline, which is the reference)";
  }
  testing::CheckReport report;
  check.run(ref, test, report);
  EXPECT_GT(report.cases, 0);
  EXPECT_EQ(report.failed, 0) << report.failed << " of " << report.cases << " cases failed";
  for (const std::string& f : report.failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(AllIsas, KernelVsBaseline, ::testing::ValuesIn(AllIsaSlots()), IsaSlotName);

// Short prompt chunks (and drafted tokens) run the few-token matmuls; on
// the tables that have them (AVX-512) each token's outputs are its matvec's, bit for
// bit, so a chunk of 2-11 tokens gives the trunk projections the decode
// step would. The other tables still match the baseline within tolerance
// (MatchesBaseline above) but make no such promise.
TEST(FewTokenMatMul, EachTokenEqualsItsMatVecOnAvx512) {
  bool checked = false;
  for (Isa isa : SupportedIsas()) {
    if (isa != Isa::kAvx512) continue;
    const KernelTable t = BuildKernelTable(isa);
    testing::CheckReport report;
    testing::CheckFewTokenMatMulEqualsMatVec(t, report);
    EXPECT_GT(report.cases, 0);
    EXPECT_EQ(report.failed, 0) << t.name << ": " << report.failed << " of " << report.cases
                                << " cases";
    for (const std::string& f : report.failures) ADD_FAILURE() << f;
    checked = true;
  }
  if (!checked) GTEST_SKIP() << "this CPU (or build) has no AVX-512 table";
}

bool Complete(const KernelTable& t) {
  return t.dot_f32 && t.axpy_f32 && t.matvec_f32 && t.matvec_q8g && t.matvec_q4g && t.matvec_q3g &&
         t.matmul_f32 && t.matmul_q8g && t.matmul_q4g && t.matmul_q3g && t.dequant_q8g &&
         t.dequant_q4g && t.dequant_q3g && t.lut_build && t.vq_apply8 && t.vq_matmul8 &&
         t.vq_apply6 && t.lut_quantize && t.kda_step;
}

TEST(Backend, BaselineTableIsCompleteAndNamedCpu) {
  const KernelTable t = BuildKernelTable(Isa::kBaseline);
  EXPECT_TRUE(Complete(t));
  EXPECT_EQ(t.name, "CPU");
  EXPECT_FALSE(t.on_device);
  EXPECT_EQ(BaselineKernels().name, "CPU");
  EXPECT_EQ(SupportedIsas().front(), Isa::kBaseline);
}

TEST(Backend, EverySupportedTableIsCompleteAndNamedForItsIsa) {
  for (Isa isa : SupportedIsas()) {
    const KernelTable t = BuildKernelTable(isa);
    EXPECT_TRUE(Complete(t)) << IsaName(isa);
    EXPECT_EQ(t.name.rfind(IsaName(isa), 0), 0u) << t.name << " vs " << IsaName(isa);
  }
}

// What the best ISA's table is called on this machine.
std::string BestName() { return BuildKernelTable(SupportedIsas().back()).name; }

TEST(Backend, WasteBackendCpuForcesTheBaseline) {
  EXPECT_EQ(BuildActiveTable("cpu").name, "CPU");
  EXPECT_EQ(BuildActiveTable(nullptr).name, BestName());
  // Only the exact value "cpu" switches; anything else is ignored (ENGINE.md §2).
  EXPECT_EQ(BuildActiveTable("").name, BestName());
  EXPECT_EQ(BuildActiveTable("avx2").name, BestName());
}

// Run once as-is and once by ctest with WASTE_BACKEND=cpu (tests/CMakeLists.txt).
TEST(Backend, ActiveTableFollowsTheEnvironment) {
  const char* env = std::getenv("WASTE_BACKEND");
  if (env != nullptr && std::strcmp(env, "cpu") == 0) {
    EXPECT_EQ(ActiveKernels().name, "CPU");
    EXPECT_EQ(ActiveKernels().vq_apply6, BaselineKernels().vq_apply6);
  } else {
    EXPECT_EQ(ActiveKernels().name, BestName());
  }
}

// Independent of dispatch.cc's own detection: ask cpu_features what the CPU
// has and check the name the dispatcher gives the best table.
TEST(Backend, SelectsTheBestIsaThisCpuHas) {
#if defined(__x86_64__)
  const cpu_features::X86Features f = cpu_features::GetX86Info().features;
  const std::string name = BuildActiveTable(nullptr).name;
  if (f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq) {
    EXPECT_EQ(name.rfind("AVX-512", 0), 0u) << name;
    EXPECT_EQ(name, f.avx512vbmi ? "AVX-512+VBMI" : "AVX-512");
    EXPECT_EQ(CpuHasAvx512Vbmi(), static_cast<bool>(f.avx512vbmi));
    EXPECT_EQ(CpuHasAvx512Vnni(), static_cast<bool>(f.avx512vnni));
  } else if (f.avx2 && f.fma3) {
    EXPECT_EQ(name, "AVX2");
  } else {
    EXPECT_EQ(name, "CPU");
  }
#elif defined(__aarch64__)
  EXPECT_EQ(BuildActiveTable(nullptr).name, "NEON");
#else
  GTEST_SKIP() << "no SIMD backend exists for this architecture";
#endif
}

}  // namespace
}  // namespace waste::kernels
