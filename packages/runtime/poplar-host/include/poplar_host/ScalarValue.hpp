// poplar-host: emulation internals shared by the API headers.
#ifndef poplar_host_ScalarValue_hpp
#define poplar_host_ScalarValue_hpp

#include <type_traits>
#include <vector>

namespace poplar_host {

/// A host value for a constant or a vertex field, kept exactly (an integer
/// stays an integer) until it is converted to the device type.
struct ScalarValue {
  enum class Kind { Signed, Unsigned, Float } kind = Kind::Signed;
  long long i = 0;
  unsigned long long u = 0;
  double d = 0;

  template <class T> static ScalarValue of(T v) {
    ScalarValue s;
    if constexpr (std::is_floating_point<T>::value) {
      s.kind = Kind::Float;
      s.d = static_cast<double>(v);
    } else if constexpr (std::is_signed<T>::value) {
      s.kind = Kind::Signed;
      s.i = static_cast<long long>(v);
    } else {
      s.kind = Kind::Unsigned;
      s.u = static_cast<unsigned long long>(v);
    }
    return s;
  }
  double asDouble() const {
    return kind == Kind::Float ? d : kind == Kind::Signed ? double(i) : double(u);
  }
  /// The value converted to T the way a C++ cast would.
  template <class T> T as() const {
    return kind == Kind::Float ? static_cast<T>(d) : kind == Kind::Signed ? static_cast<T>(i) : static_cast<T>(u);
  }
};

} // namespace poplar_host

// Instantiated once, in the library (Graph.cpp): the constants and vertex fields a host program
// sets hold their values in one, and instantiating it in every program costs its compile.
extern template class std::vector<poplar_host::ScalarValue>;

#endif
