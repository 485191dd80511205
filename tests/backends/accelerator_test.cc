// Accelerators may decline at run time (no device) and the engine keeps the
// backend it had; one that accepts takes only the slots it implements.
// (This build has no real accelerator: there is no GPU here, and each
// WASTE_ENABLE_<NAME> option refuses to configure without its source —
// see accelerator_configure_refusal in tests/CMakeLists.txt.)
#include <gtest/gtest.h>

#include "kernels/backends/backend.h"
#include "kernels/kernel_table.h"

namespace waste::backends {
namespace {

float FakeDot(const float*, const float*, size_t) { return 42.0f; }

bool DeclineNoDevice(kernels::KernelTable& t, std::string* why) {
  t.dot_f32 = &FakeDot;  // scribbles before declining: must not leak
  t.name = "Broken";
  *why = "no device found";
  return false;
}

bool AcceptDot(kernels::KernelTable& t, std::string*) {
  t.dot_f32 = &FakeDot;
  t.name = "FakeGPU";
  t.on_device = true;
  return true;
}

TEST(Accelerator, DeclineKeepsTheBackendItHad) {
  kernels::KernelTable table = kernels::BuildKernelTable(kernels::SupportedIsas().back());
  const std::string before = table.name;
  const auto dot = table.dot_f32;
  const Accelerator list[] = {{"CUDA", &DeclineNoDevice}, {"Metal", &DeclineNoDevice}};
  auto outcomes = ApplyAccelerators(table, list);
  ASSERT_EQ(outcomes.size(), 2u);
  EXPECT_FALSE(outcomes[0].accepted);
  EXPECT_EQ(outcomes[0].why, "no device found");
  EXPECT_EQ(table.name, before);
  EXPECT_EQ(table.dot_f32, dot);
  EXPECT_FALSE(table.on_device);
}

TEST(Accelerator, AcceptTakesOnlyItsSlots) {
  kernels::KernelTable table = kernels::BuildKernelTable(kernels::Isa::kBaseline);
  const auto matvec = table.matvec_q4g;
  const Accelerator list[] = {{"CUDA", &DeclineNoDevice}, {"BLAS", &AcceptDot}};
  auto outcomes = ApplyAccelerators(table, list);
  EXPECT_FALSE(outcomes[0].accepted);
  EXPECT_TRUE(outcomes[1].accepted);
  EXPECT_EQ(table.name, "FakeGPU");
  EXPECT_TRUE(table.on_device);
  EXPECT_EQ(table.dot_f32(nullptr, nullptr, 0), 42.0f);
  EXPECT_EQ(table.matvec_q4g, matvec);
}

TEST(Accelerator, NoneCompiledInThisBuild) {
  EXPECT_TRUE(CompiledAccelerators().empty());
  EXPECT_EQ(kernels::ActiveKernels().name.rfind("Fake", 0), std::string::npos);
}

}  // namespace
}  // namespace waste::backends
