// poplar-host: a CPU emulation of the public Poplar API.
//
// Device-side API for codelets: vertex base classes and field types. Fields
// are bound by the engine to buffers it gathers before compute() and
// scatters after it; vertex code sees them as in Poplar.
#ifndef poplar_Vertex_hpp
#define poplar_Vertex_hpp

#include <poplar/HalfFloat.hpp>

#include <cstddef>
#include <type_traits>

namespace poplar_host {
struct FieldAccess; // binds fields; see poplar_host/VertexRegistry.hpp
}

namespace poplar {

/// A vertex run by one worker: `bool compute()` or `void compute()`.
class Vertex {
public:
  static constexpr unsigned numWorkers() { return 1; }
};

/// A vertex run by all six workers of a tile: `void compute(unsigned workerId)`.
class MultiVertex {
public:
  static constexpr unsigned numWorkers() { return 6; }
};

/// A vertex run by the supervisor context: `bool compute()` or `void compute()`.
class SupervisorVertex {
public:
  static constexpr unsigned numWorkers() { return 1; }
};

/// Memory layouts of vectors. They change the encoding on the IPU, not the
/// meaning; ONE_PTR vectors have no size() on the device (they do here).
enum class VectorLayout { ONE_PTR, SPAN, SHORT_SPAN, SCALED_PTR32, SCALED_PTR64, SCALED_PTR128, COMPACT_PTR };
enum class VectorListLayout { ONE_PTR, SCALED_PTR32, SCALED_PTR64, SCALED_PTR128, DELTAN, DELTANELEMENTS, COMPACT_DELTAN, COMPACT_PTR };

namespace detail {
/// A contiguous run of T with a size.
template <class T> class Span {
public:
  using value_type = std::remove_const_t<T>;
  std::size_t size() const { return size_; }
  T &operator[](std::size_t i) const { return ptr_[i]; }
  T *begin() const { return ptr_; }
  T *end() const { return ptr_ + size_; }
  T *data() const { return ptr_; }

private:
  friend struct poplar_host::FieldAccess;
  T *ptr_ = nullptr;
  std::size_t size_ = 0;
};
} // namespace detail

/// A vector field (or, as a plain member, vector state set with setInitialValue).
template <class T, VectorLayout L = VectorLayout::SPAN, unsigned MinAlign = alignof(T),
          bool Interleaved = false>
class Vector : public detail::Span<T> {};

/// A list of vectors (one per connected tensor), e.g. Input<VectorList<float, DELTANELEMENTS>>.
template <class T, VectorListLayout L, unsigned MinAlign = alignof(T), bool Interleaved = false>
class VectorList;

namespace detail {
/// Edge behaviour shared by Input/Output/InOut. `C` is T or const T.
template <class T, class C> class ScalarEdge {
public:
  C &operator*() const { return *ptr_; }
  C *operator->() const { return ptr_; }
  operator C &() const { return *ptr_; }

protected:
  friend struct poplar_host::FieldAccess;
  C *ptr_ = nullptr;
};

template <class T> struct IsVector : std::false_type {};
template <class T, VectorLayout L, unsigned A, bool I>
struct IsVector<Vector<T, L, A, I>> : std::true_type {
  using elem = T;
};
template <class T> struct IsVectorList : std::false_type {};
template <class T, VectorListLayout L, unsigned A, bool I>
struct IsVectorList<VectorList<T, L, A, I>> : std::true_type {
  using elem = T;
};

/// A list of spans (Input<VectorList<T>>).
template <class C> class SpanList {
public:
  std::size_t size() const { return size_; }
  const Span<C> &operator[](std::size_t i) const { return ptr_[i]; }
  const Span<C> *begin() const { return ptr_; }
  const Span<C> *end() const { return ptr_ + size_; }

private:
  friend struct poplar_host::FieldAccess;
  const Span<C> *ptr_ = nullptr;
  std::size_t size_ = 0;
};

template <class T, bool Const, class Enable = void> struct EdgeBase {
  using type = ScalarEdge<T, std::conditional_t<Const, const T, T>>;
};
template <class T, bool Const> struct EdgeBase<T, Const, std::enable_if_t<IsVector<T>::value>> {
  using type = Span<std::conditional_t<Const, const typename IsVector<T>::elem, typename IsVector<T>::elem>>;
};
template <class T, bool Const> struct EdgeBase<T, Const, std::enable_if_t<IsVectorList<T>::value>> {
  using type =
      SpanList<std::conditional_t<Const, const typename IsVectorList<T>::elem, typename IsVectorList<T>::elem>>;
};
} // namespace detail

/// Data the vertex reads: a scalar (*in) or a vector (in[i], in.size()).
template <class T> class Input : public detail::EdgeBase<T, true>::type {};
/// Data the vertex writes: *out = x or out[i] = x.
template <class T> class Output : public detail::EdgeBase<T, false>::type {};
/// Data the vertex reads and writes.
template <class T> class InOut : public detail::EdgeBase<T, false>::type {};

} // namespace poplar

#endif
