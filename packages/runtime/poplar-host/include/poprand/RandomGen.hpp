// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef poprand_RandomGen_hpp
#define poprand_RandomGen_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>

#include <cstdint>

namespace poprand {

/// Seeds the generators of the graph's tiles (which stochastic rounding
/// draws from) from a 64-bit seed: an UNSIGNED_INT tensor of 2 elements,
/// low word first. The random tensor functions of poprand are not emulated.
void setSeed(poplar::Graph &graph, const poplar::Tensor &masterSeed, uint32_t seedModifier,
             poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {});

} // namespace poprand

#endif
