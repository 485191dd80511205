// What `info` reports about a container: arch, shapes, parameter counts
// (MODEL.md §12) and the quantization string (ENGINE.md §1.6).
#pragma once

#include "container/container.h"
#include "waste/types.h"

namespace waste {

ModelInfo DescribeModel(const Container& container);

}  // namespace waste
