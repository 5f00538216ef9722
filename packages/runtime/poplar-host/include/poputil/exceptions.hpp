// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef poputil_exceptions_hpp
#define poputil_exceptions_hpp

#include <stdexcept>
#include <string>

namespace poputil {

/// Errors raised by the PopLibs functions (bad shapes, types, options).
struct poplibs_error : std::runtime_error {
  explicit poplibs_error(const std::string &s) : std::runtime_error(s) {}
  explicit poplibs_error(const char *s) : std::runtime_error(s) {}
};

} // namespace poputil

#endif
