// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef popops_Zero_hpp
#define popops_Zero_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>

namespace popops {

/// Sets every element of t to zero.
void zero(poplar::Graph &graph, const poplar::Tensor &t, poplar::program::Sequence &prog,
          const poplar::DebugContext &debugContext = {});

} // namespace popops

#endif
