// Cutting a prompt span into chunks. A span (model/forward.h) batches what
// may be batched across its chunks; whatever decides a bit (attention, the
// matmuls whose kernel depends on the token count) runs chunk by chunk,
// always cut the same way: pieces of `chunk` tokens from the span's first.
#pragma once

#include <algorithm>
#include <cstddef>

namespace waste {

// fn(first, count) for [0, n) in pieces of `chunk` tokens, in order.
template <class Fn>
void ForEachChunk(size_t n, size_t chunk, Fn&& fn) {
  for (size_t first = 0; first < n; first += chunk) fn(first, std::min(chunk, n - first));
}

}  // namespace waste
