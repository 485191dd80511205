// Accelerators: optional build-time backends (CUDA, Metal, BLAS) that take
// over kernel slots after the CPU ISA has filled the table. Each probes its
// device at run time and either accepts (overwrites the slots it does well,
// renames the table, may set on_device) or declines — and a decline leaves
// the table exactly as it was, so the engine keeps the backend it had.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "kernels/kernel_table.h"

namespace waste::backends {

struct Accelerator {
  const char* name;
  // Returns true after taking slots in `table`; false with `why` to decline.
  bool (*try_register)(kernels::KernelTable& table, std::string* why);
};

// Accelerators compiled into this build (WASTE_ENABLE_<NAME>), in the
// order CUDA, Metal, BLAS. Empty when none is enabled.
std::span<const Accelerator> CompiledAccelerators();

struct AcceleratorOutcome {
  std::string name;
  bool accepted = false;
  std::string why;  // reason for a decline
};

// Offers `table` to each accelerator in turn. An accelerator works on a
// copy that is committed only when it accepts.
std::vector<AcceleratorOutcome> ApplyAccelerators(kernels::KernelTable& table,
                                                  std::span<const Accelerator> accelerators);

}  // namespace waste::backends
