// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef popops_Cast_hpp
#define popops_Cast_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>

namespace popops {

/// Converts src to dstType: floats round to nearest even, floats to integers
/// truncate toward zero (saturating; NaN gives 0), anything to bool is != 0.
/// The result has src's shape and tile mapping.
poplar::Tensor cast(poplar::Graph &graph, const poplar::Tensor &src, const poplar::Type &dstType,
                    poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {});
/// A program converting src into the existing tensor dst.
poplar::program::Program cast(poplar::Graph &graph, poplar::Tensor src, poplar::Tensor dst,
                              const poplar::DebugContext &debugContext = {});

} // namespace popops

#endif
