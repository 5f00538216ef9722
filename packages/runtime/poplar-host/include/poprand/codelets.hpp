// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef poprand_codelets_hpp
#define poprand_codelets_hpp

#include <poplar/Graph.hpp>

namespace poprand {

/// PopLibs' poprand vertices: nothing to load in the emulation.
void addCodelets(poplar::Graph &graph);

} // namespace poprand

#endif
