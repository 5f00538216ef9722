// poplar-host: a CPU emulation of the public Poplar API (see the README).
#ifndef poplar_ArrayRef_hpp
#define poplar_ArrayRef_hpp

#include <array>
#include <cstddef>
#include <initializer_list>
#include <vector>

namespace poplar {

/// A non-owning view of a contiguous sequence, built implicitly from a
/// std::vector, a std::array or a braced list. Like Poplar's,
/// it must not outlive the storage it refers to (a braced list lives until the
/// end of the full expression, which is enough for a call argument).
template <class T> class ArrayRef {
public:
  using value_type = T;
  using const_iterator = const T *;
  using iterator = const T *;

  ArrayRef() = default;
  ArrayRef(const T *p, std::size_t n) : ptr_(p), size_(n) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime" // intended: see the class comment
#endif
  ArrayRef(std::initializer_list<T> list) : ptr_(list.begin()), size_(list.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  template <class A>
  ArrayRef(const std::vector<T, A> &v) : ptr_(v.data()), size_(v.size()) {}
  template <std::size_t N>
  ArrayRef(const std::array<T, N> &a) : ptr_(a.data()), size_(N) {}

  const T *data() const { return ptr_; }
  std::size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const T &operator[](std::size_t i) const { return ptr_[i]; }
  const T &front() const { return ptr_[0]; }
  const T &back() const { return ptr_[size_ - 1]; }
  const T *begin() const { return ptr_; }
  const T *end() const { return ptr_ + size_; }
  std::vector<T> vec() const { return std::vector<T>(begin(), end()); }
  operator std::vector<T>() const { return vec(); }

private:
  const T *ptr_ = nullptr;
  std::size_t size_ = 0;
};

} // namespace poplar

#endif
