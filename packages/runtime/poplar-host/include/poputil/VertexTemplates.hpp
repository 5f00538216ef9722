// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef poputil_VertexTemplates_hpp
#define poputil_VertexTemplates_hpp

#include <poplar/Type.hpp>

#include <string>
#include <type_traits>

namespace poputil {

/// How a template argument is spelt in a vertex name; specialise for enums.
template <class T, class Enable = void> struct VertexTemplateToString {
  static std::string to_string(const T &x) { return std::to_string(x); }
};
template <> struct VertexTemplateToString<poplar::Type> {
  static std::string to_string(const poplar::Type &t) { return t.toString(); }
};
template <> struct VertexTemplateToString<bool> {
  static std::string to_string(bool b) { return b ? "true" : "false"; }
};
template <> struct VertexTemplateToString<std::string> {
  static std::string to_string(const std::string &s) { return s; }
};
template <class T>
struct VertexTemplateToString<T, std::enable_if_t<std::is_convertible<T, const char *>::value>> {
  static std::string to_string(const char *s) { return s; }
};

/// The name of a template vertex: templateVertex("ns::V", FLOAT, true) is
/// "ns::V<float,true>".
template <class... Args> std::string templateVertex(const std::string &name, Args &&...args) {
  if constexpr (sizeof...(Args) == 0) {
    return name;
  } else {
    std::string s = name + "<";
    bool first = true;
    auto add = [&](const std::string &a) {
      s += (first ? "" : ",") + a;
      first = false;
    };
    (add(VertexTemplateToString<std::decay_t<Args>>::to_string(args)), ...);
    return s + ">";
  }
}

} // namespace poputil

#endif
