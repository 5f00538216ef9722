// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef popops_Operation_hpp
#define popops_Operation_hpp

#include <ostream>

namespace popops {

/// Reduction operations.
enum class Operation { ADD, MUL, MIN, MAX, LOGICAL_AND, LOGICAL_OR, SQUARE_ADD, LOG_ADD };

std::ostream &operator<<(std::ostream &os, const Operation &op);

} // namespace popops

#endif
