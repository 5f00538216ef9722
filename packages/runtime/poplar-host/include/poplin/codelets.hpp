// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef poplin_codelets_hpp
#define poplin_codelets_hpp

#include <poplar/Graph.hpp>

namespace poplin {

/// Adds the poplin vertices to a graph (nothing to load in the emulation).
void addCodelets(poplar::Graph &graph);

} // namespace poplin

#endif
