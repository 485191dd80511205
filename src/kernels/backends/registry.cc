#include "kernels/backends/backend.h"

namespace waste::backends {

std::span<const Accelerator> CompiledAccelerators() {
  // Each WASTE_ENABLE_<NAME> build adds its entry here (CMake stops a
  // configuration whose accelerator source does not exist). None today.
  return {};
}

std::vector<AcceleratorOutcome> ApplyAccelerators(kernels::KernelTable& table,
                                                  std::span<const Accelerator> accelerators) {
  std::vector<AcceleratorOutcome> outcomes;
  for (const Accelerator& a : accelerators) {
    kernels::KernelTable candidate = table;
    AcceleratorOutcome o;
    o.name = a.name;
    o.accepted = a.try_register(candidate, &o.why);
    if (o.accepted) table = std::move(candidate);
    outcomes.push_back(std::move(o));
  }
  return outcomes;
}

}  // namespace waste::backends
