// poplar-host: emulation internals.
//
// The registry of vertex classes. popc-reflect.js writes, for a codelets
// file, a codelets_registry.cpp that describes each vertex class with
// VertexType<...>("ns::Name<float>").fields(table, n).add(), each field in the
// table written fieldSpec<decltype(Cls::in)>("in", offsetof(Cls, in)); the
// templates below work out from each member's C++ type how the engine binds
// it (edge direction, scalar / vector / list, element type) and how to run
// compute().
#ifndef poplar_host_VertexRegistry_hpp
#define poplar_host_VertexRegistry_hpp

#include <poplar/Type.hpp>
#include <poplar/Vertex.hpp>
#include <poplar_host/ScalarValue.hpp>

#include <cstddef>
#include <cstring>
#include <memory>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

namespace poplar_host {

enum class FieldDirection { In, Out, InOut, State };
enum class FieldShape { Scalar, Vector, List };

/// One buffer the engine binds to an edge (data points to `size` elements).
struct BindRegion {
  void *data;
  std::size_t size;
};

struct FieldDesc {
  std::string name;
  /// False for members the emulation cannot bind (pointers, arrays, structs);
  /// connecting one is an error, leaving it alone is fine.
  bool supported = false;
  FieldDirection direction = FieldDirection::State;
  FieldShape shape = FieldShape::Scalar;
  poplar::Type elementType;
  /// Where the member lies in a vertex object, and what binds or sets a member
  /// of its type: plain functions of the member's type alone, shared by every
  /// vertex class (a registry compiles in a fraction of the time of one
  /// std::function per field).
  std::size_t offset = 0;
  std::shared_ptr<void> (*bindMember)(void *member, const BindRegion *regions, std::size_t n) = nullptr;
  std::shared_ptr<void> (*setMember)(void *member, const ScalarValue *values, std::size_t n) = nullptr;

  /// Points the edge at the given buffers (one for scalar/vector, n for a list);
  /// returns storage the vertex object keeps referring to.
  std::shared_ptr<void> bind(void *vertex, const BindRegion *regions, std::size_t n) const {
    return bindMember(static_cast<char *>(vertex) + offset, regions, n);
  }
  /// Sets a plain member from host values (converted like a C++ cast).
  std::shared_ptr<void> setState(void *vertex, const ScalarValue *values, std::size_t n) const {
    return setMember(static_cast<char *>(vertex) + offset, values, n);
  }
};

struct VertexDesc {
  std::string name;
  bool multiVertex = false;
  unsigned numWorkers = 1;
  void *(*create)() = nullptr;
  void (*destroy)(void *) = nullptr;
  /// Runs compute() on each worker in turn (0, 1, ...; once for a single-worker vertex) and
  /// returns the first worker whose compute() returned false, or numWorkers when none did (a void
  /// compute() counts as true). One call for all the workers lets the compiler share their set-up.
  unsigned (*compute)(void *vertex) = nullptr;
  std::vector<FieldDesc> fields;

  const FieldDesc *field(const std::string &n) const {
    for (const auto &f : fields)
      if (f.name == n) return &f;
    return nullptr;
  }
};

void registerVertex(VertexDesc desc);
/// Records that the registry of a codelets file is linked in (it may hold no
/// vertices); Graph::addCodelets needs at least one.
void registerCodeletsFile(const std::string &name);
std::vector<std::string> registeredCodeletsFiles();
const VertexDesc *findVertex(const std::string &name);
std::vector<std::string> registeredVertexNames();
/// Vertex names compare after removing blanks around punctuation and writing
/// `unsigned` as `unsigned int`, so "ns::V< float, true >" finds "ns::V<float,true>".
std::string canonicalVertexName(const std::string &name);

/// Sets the internals of the field types declared in poplar/Vertex.hpp.
struct FieldAccess {
  template <class S, class P> static void setSpan(S &span, P *ptr, std::size_t n) {
    span.ptr_ = ptr;
    span.size_ = n;
  }
  template <class E, class P> static void setScalar(E &edge, P *ptr) { edge.ptr_ = ptr; }
};

template <class T> constexpr poplar::Type::Id typeIdOf() {
  using U = std::remove_cv_t<T>;
  using Id = poplar::Type::Id;
  if constexpr (std::is_same<U, half>::value) return Id::HALF;
  else if constexpr (std::is_same<U, float>::value) return Id::FLOAT;
  else if constexpr (std::is_same<U, bool>::value) return Id::BOOL;
  else if constexpr (std::is_same<U, char>::value) return Id::CHAR;
  else if constexpr (std::is_same<U, signed char>::value) return Id::SIGNED_CHAR;
  else if constexpr (std::is_same<U, unsigned char>::value) return Id::UNSIGNED_CHAR;
  else if constexpr (std::is_integral<U>::value && std::is_signed<U>::value && sizeof(U) == 2) return Id::SHORT;
  else if constexpr (std::is_integral<U>::value && !std::is_signed<U>::value && sizeof(U) == 2) return Id::UNSIGNED_SHORT;
  else if constexpr (std::is_integral<U>::value && std::is_signed<U>::value && sizeof(U) == 4) return Id::INT;
  else if constexpr (std::is_integral<U>::value && !std::is_signed<U>::value && sizeof(U) == 4) return Id::UNSIGNED_INT;
  else if constexpr (std::is_integral<U>::value && std::is_signed<U>::value && sizeof(U) == 8) return Id::LONGLONG;
  else if constexpr (std::is_integral<U>::value && !std::is_signed<U>::value && sizeof(U) == 8) return Id::UNSIGNED_LONGLONG;
  else return Id::INVALID;
}

template <class T> constexpr bool isDeviceScalar() {
  return typeIdOf<T>() != poplar::Type::Id::INVALID;
}

template <class T> T castScalar(const ScalarValue &v) {
  using U = std::remove_cv_t<T>;
  if constexpr (std::is_same<U, half>::value) return half(v.asDouble());
  else return v.as<U>();
}

namespace detail {
using poplar::Input;
using poplar::InOut;
using poplar::Output;

template <template <class> class Edge> constexpr FieldDirection directionOf() {
  if constexpr (std::is_same<Edge<int>, Input<int>>::value) return FieldDirection::In;
  else if constexpr (std::is_same<Edge<int>, Output<int>>::value) return FieldDirection::Out;
  else return FieldDirection::InOut;
}

template <class M, class Enable = void> struct FieldTraits {
  static constexpr bool supported = false;
};

// Input<T> / Output<T> / InOut<T> with T a scalar.
template <template <class> class Edge, class T>
struct EdgeTraitsScalar {
  static constexpr bool supported = true;
  static constexpr FieldDirection direction = directionOf<Edge>();
  static constexpr FieldShape shape = FieldShape::Scalar;
  using elem = T;
  static std::shared_ptr<void> bind(Edge<T> &m, const BindRegion *r, std::size_t) {
    FieldAccess::setScalar(m, static_cast<T *>(r[0].data));
    return nullptr;
  }
};
template <class T>
struct FieldTraits<Input<T>, std::enable_if_t<isDeviceScalar<T>()>> : EdgeTraitsScalar<Input, T> {};
template <class T>
struct FieldTraits<Output<T>, std::enable_if_t<isDeviceScalar<T>()>> : EdgeTraitsScalar<Output, T> {};
template <class T>
struct FieldTraits<InOut<T>, std::enable_if_t<isDeviceScalar<T>()>> : EdgeTraitsScalar<InOut, T> {};

// Edge<Vector<T>>: one contiguous buffer.
template <template <class> class Edge, class V>
struct EdgeTraitsVector {
  static constexpr bool supported = true;
  static constexpr FieldDirection direction = directionOf<Edge>();
  static constexpr FieldShape shape = FieldShape::Vector;
  using elem = typename poplar::detail::IsVector<V>::elem;
  static std::shared_ptr<void> bind(Edge<V> &m, const BindRegion *r, std::size_t) {
    FieldAccess::setSpan(m, static_cast<elem *>(r[0].data), r[0].size);
    return nullptr;
  }
};
template <class V>
struct FieldTraits<Input<V>, std::enable_if_t<poplar::detail::IsVector<V>::value>> : EdgeTraitsVector<Input, V> {};
template <class V>
struct FieldTraits<Output<V>, std::enable_if_t<poplar::detail::IsVector<V>::value>> : EdgeTraitsVector<Output, V> {};
template <class V>
struct FieldTraits<InOut<V>, std::enable_if_t<poplar::detail::IsVector<V>::value>> : EdgeTraitsVector<InOut, V> {};

// Edge<VectorList<T>>: a list of buffers.
template <template <class> class Edge, class VL>
struct EdgeTraitsVectorList {
  static constexpr bool supported = true;
  static constexpr FieldDirection direction = directionOf<Edge>();
  static constexpr FieldShape shape = FieldShape::List;
  using elem = typename poplar::detail::IsVectorList<VL>::elem;
  using SpanT = poplar::detail::Span<std::conditional_t<direction == FieldDirection::In, const elem, elem>>;
  static std::shared_ptr<void> bind(Edge<VL> &m, const BindRegion *r, std::size_t n) {
    std::shared_ptr<SpanT> spans(new SpanT[n ? n : 1], std::default_delete<SpanT[]>());
    for (std::size_t i = 0; i < n; ++i)
      FieldAccess::setSpan(spans.get()[i], static_cast<elem *>(r[i].data), r[i].size);
    FieldAccess::setSpan(m, static_cast<const SpanT *>(spans.get()), n);
    return spans;
  }
};
template <class VL>
struct FieldTraits<Input<VL>, std::enable_if_t<poplar::detail::IsVectorList<VL>::value>>
    : EdgeTraitsVectorList<Input, VL> {};
template <class VL>
struct FieldTraits<Output<VL>, std::enable_if_t<poplar::detail::IsVectorList<VL>::value>>
    : EdgeTraitsVectorList<Output, VL> {};
template <class VL>
struct FieldTraits<InOut<VL>, std::enable_if_t<poplar::detail::IsVectorList<VL>::value>>
    : EdgeTraitsVectorList<InOut, VL> {};

// Vector<Edge<Vector<T>>>: a list of buffers, one edge object each.
template <class M> struct VectorOfEdges : std::false_type {};
template <template <class> class Edge, class V, poplar::VectorLayout L, unsigned A, bool I>
struct VectorOfEdges<poplar::Vector<Edge<V>, L, A, I>> {
  static constexpr bool value = poplar::detail::IsVector<V>::value &&
                                (std::is_same<Edge<V>, Input<V>>::value || std::is_same<Edge<V>, Output<V>>::value ||
                                 std::is_same<Edge<V>, InOut<V>>::value);
  static constexpr FieldDirection direction = directionOf<Edge>();
  using EdgeT = Edge<V>;
  using elem = typename poplar::detail::IsVector<V>::elem;
};
template <class M> struct FieldTraits<M, std::enable_if_t<VectorOfEdges<M>::value>> {
  using Info = VectorOfEdges<M>;
  static constexpr bool supported = true;
  static constexpr FieldDirection direction = Info::direction;
  static constexpr FieldShape shape = FieldShape::List;
  using elem = typename Info::elem;
  static std::shared_ptr<void> bind(M &m, const BindRegion *r, std::size_t n) {
    using EdgeT = typename Info::EdgeT;
    std::shared_ptr<EdgeT> edges(new EdgeT[n ? n : 1], std::default_delete<EdgeT[]>());
    for (std::size_t i = 0; i < n; ++i)
      FieldAccess::setSpan(edges.get()[i], static_cast<elem *>(r[i].data), r[i].size);
    FieldAccess::setSpan(m, edges.get(), n);
    return edges;
  }
};

// Plain scalar members (vertex state set with setInitialValue).
template <class M> struct FieldTraits<M, std::enable_if_t<isDeviceScalar<M>()>> {
  static constexpr bool supported = true;
  static constexpr FieldDirection direction = FieldDirection::State;
  static constexpr FieldShape shape = FieldShape::Scalar;
  using elem = std::remove_cv_t<M>;
  static std::shared_ptr<void> set(M &m, const ScalarValue *v, std::size_t) {
    // Vertex state may be declared const; the engine writes it before compute
    // like the device loader does.
    const_cast<elem &>(m) = castScalar<elem>(v[0]);
    return nullptr;
  }
};

// Plain Vector<T> members (vector state).
template <class M>
struct FieldTraits<M, std::enable_if_t<poplar::detail::IsVector<std::remove_cv_t<M>>::value &&
                                       isDeviceScalar<typename poplar::detail::IsVector<std::remove_cv_t<M>>::elem>()>> {
  static constexpr bool supported = true;
  static constexpr FieldDirection direction = FieldDirection::State;
  static constexpr FieldShape shape = FieldShape::Vector;
  using elem = typename poplar::detail::IsVector<std::remove_cv_t<M>>::elem;
  static std::shared_ptr<void> set(M &m, const ScalarValue *v, std::size_t n) {
    using E = std::remove_cv_t<elem>;
    std::shared_ptr<E> data(new E[n ? n : 1], std::default_delete<E[]>());
    for (std::size_t i = 0; i < n; ++i) data.get()[i] = castScalar<E>(v[i]);
    FieldAccess::setSpan(const_cast<std::remove_cv_t<M> &>(m), data.get(), n);
    return data;
  }
};

template <class M> std::shared_ptr<void> bindMember(void *member, const BindRegion *regions, std::size_t n) {
  return FieldTraits<M>::bind(*static_cast<M *>(member), regions, n);
}
template <class M> std::shared_ptr<void> setMember(void *member, const ScalarValue *values, std::size_t n) {
  // vertex state may be declared const: FieldTraits::set writes it as the loader would
  return FieldTraits<M>::set(*static_cast<std::remove_cv_t<M> *>(member), values, n);
}

template <class V> unsigned runCompute(void *p) {
  V &v = *static_cast<V *>(p);
  if constexpr (std::is_base_of<poplar::MultiVertex, V>::value) {
    constexpr unsigned workers = poplar::MultiVertex::numWorkers();
    for (unsigned w = 0; w < workers; ++w) {
      if constexpr (std::is_same<decltype(v.compute(w)), bool>::value) {
        if (!v.compute(w)) return w;
      } else {
        v.compute(w);
      }
    }
    return workers;
  } else {
    if constexpr (std::is_same<decltype(v.compute()), bool>::value) return v.compute() ? 1u : 0u;
    else {
      v.compute();
      return 1u;
    }
  }
}
} // namespace detail

/// One member of a vertex class, as a registry's table of fields describes it.
struct FieldSpec {
  const char *name;
  bool supported;
  FieldDirection direction;
  FieldShape shape;
  poplar::Type::Id elementType;
  std::size_t offset;
  std::shared_ptr<void> (*bindMember)(void *member, const BindRegion *regions, std::size_t n);
  std::shared_ptr<void> (*setMember)(void *member, const ScalarValue *values, std::size_t n);
};

/// The spec of a member of type M at `offset` in its class: a constant, so that a registry's
/// tables of fields are data, compiled in no time, where code per field took a third of its build.
template <class M> constexpr FieldSpec fieldSpec(const char *name, std::size_t offset) {
  using Traits = detail::FieldTraits<M>;
  if constexpr (!Traits::supported) {
    return FieldSpec{name, false, FieldDirection::State, FieldShape::Scalar, poplar::Type::Id::INVALID, offset, nullptr, nullptr};
  } else if constexpr (Traits::direction == FieldDirection::State) {
    return FieldSpec{name, true, Traits::direction, Traits::shape, typeIdOf<typename Traits::elem>(), offset, nullptr, &detail::setMember<M>};
  } else {
    return FieldSpec{name, true, Traits::direction, Traits::shape, typeIdOf<typename Traits::elem>(), offset, &detail::bindMember<M>, nullptr};
  }
}

/// The part of VertexType that does not depend on the class (in the library; the description is
/// held by pointer, so a registry compiles none of VertexDesc's code).
class VertexBuilder {
public:
  VertexBuilder(const char *name, bool multiVertex, unsigned numWorkers, void *(*create)(), void (*destroy)(void *),
                unsigned (*compute)(void *));
  VertexBuilder(const VertexBuilder &) = delete;
  VertexBuilder &operator=(const VertexBuilder &) = delete;
  ~VertexBuilder();
  void field(const FieldSpec &spec);
  void add();

private:
  std::unique_ptr<VertexDesc> desc_;
};

/// Describes one vertex class. `Construct` is false when the class declares a
/// default constructor without defining it (as popc code may): the object is
/// then zero-filled storage, which is how the device sees vertex state too.
template <class V, bool Construct = true> class VertexType {
public:
  explicit VertexType(const char *name)
      : builder_(name, std::is_base_of<poplar::MultiVertex, V>::value,
                 std::is_base_of<poplar::MultiVertex, V>::value ? poplar::MultiVertex::numWorkers() : 1, &create,
                 &destroy, &detail::runCompute<V>) {
    static_assert(std::is_base_of<poplar::Vertex, V>::value || std::is_base_of<poplar::MultiVertex, V>::value ||
                      std::is_base_of<poplar::SupervisorVertex, V>::value,
                  "a vertex class must derive from poplar::Vertex, MultiVertex or SupervisorVertex");
  }

  /// The fields, a table of fieldSpec()s.
  VertexType &fields(const FieldSpec *specs, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) builder_.field(specs[i]);
    return *this;
  }

  void add() { builder_.add(); }

private:
  static void *create() {
    if constexpr (Construct && std::is_default_constructible<V>::value) {
      return new V();
    } else {
      void *p = ::operator new(sizeof(V), std::align_val_t(alignof(V)));
      std::memset(p, 0, sizeof(V));
      return p;
    }
  }
  static void destroy(void *p) {
    if constexpr (Construct && std::is_default_constructible<V>::value) {
      delete static_cast<V *>(p);
    } else {
      ::operator delete(p, std::align_val_t(alignof(V)));
    }
  }

  VertexBuilder builder_;
};

} // namespace poplar_host

#endif
