// std::vector whose storage starts on a 64-byte boundary (a cache line, an
// AVX-512 register). For buffers the kernels load whole 64-byte vectors
// from: glibc's malloc gives large blocks 16-byte alignment, and a vector
// load that crosses a cache line costs two — the VQ3R plane apply from
// 16-byte-aligned tables ran 12.1-12.8 GB/s against 14.5-15.4 aligned
// (docs/PERFORMANCE.md, "A faster day").
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace waste {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};

  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) noexcept {}

  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, kAlign); }

  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace waste
