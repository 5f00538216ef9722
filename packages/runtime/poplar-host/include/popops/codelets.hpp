// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef popops_codelets_hpp
#define popops_codelets_hpp

#include <poplar/Graph.hpp>

namespace popops {

/// Adds the popops vertices to a graph. The emulation computes popops
/// functions on the host, so there is nothing to load.
void addCodelets(poplar::Graph &graph);

} // namespace popops

#endif
