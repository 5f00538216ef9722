// Storage on cache-line boundaries for the buffers the vector kernels read.
#ifndef POPLAR_HOST_CACHELINE_HPP
#define POPLAR_HOST_CACHELINE_HPP

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace poplar_host {

/// Allocates on cache-line boundaries: the vector kernels load whole 64-byte lines of a
/// variable's rows, and a load across two lines costs two (malloc aligns to 16 bytes only).
template <class T> struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlignment{64};
  CacheLineAllocator() = default;
  template <class U> CacheLineAllocator(const CacheLineAllocator<U> &) {}
  T *allocate(std::size_t n) { return static_cast<T *>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T *p, std::size_t) { ::operator delete(p, kAlignment); }
  template <class U> bool operator==(const CacheLineAllocator<U> &) const { return true; }
  template <class U> bool operator!=(const CacheLineAllocator<U> &) const { return false; }
};
/// The bytes of one variable of one replica (or of a constant).
using DeviceBytes = std::vector<std::uint8_t, CacheLineAllocator<std::uint8_t>>;
/// Float scratch of the kernels.
using CacheLineFloats = std::vector<float, CacheLineAllocator<float>>;

} // namespace poplar_host

#endif
