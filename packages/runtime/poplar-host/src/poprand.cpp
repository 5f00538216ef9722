// poprand: seeding the tiles' generators, which stochastic rounding draws
// from. The emulation's generator is not the IPU's: the same seed gives
// reproducible results here, not the IPU's bits.
#include "internal.hpp"

#include <poprand/RandomGen.hpp>
#include <poprand/codelets.hpp>
#include <poputil/exceptions.hpp>

namespace poprand {

void addCodelets(poplar::Graph &) {}

void setSeed(poplar::Graph &graph, const poplar::Tensor &masterSeed, uint32_t seedModifier,
             poplar::program::Sequence &prog, const poplar::DebugContext &debugContext) {
  if (masterSeed.elementType() != poplar::UNSIGNED_INT || masterSeed.numElements() != 2)
    throw poputil::poplibs_error(poplar_host::message("setSeed: the seed must be 2 unsigned ints, got ",
                                                      masterSeed.elementType(), masterSeed.shapeToString()));
  const unsigned first = graph.getTileOffset(), count = graph.getTarget().getNumTiles();
  const std::string name = debugContext.getPathName().empty() ? std::string("setSeed")
                                                              : debugContext.getPathName() + "/setSeed";
  // touches no tensor so that it runs alone: it may reseed the tiles of several IPUs
  poplar_host::addHostStep(prog, name, [=](poplar_host::ReplicaContext &ctx) {
    const auto words = ctx.read(masterSeed);
    const std::uint64_t seed = static_cast<std::uint64_t>(words[0]) | (static_cast<std::uint64_t>(words[1]) << 32);
    const std::uint64_t base = poplar_host::mix64(poplar_host::mix64(seed) ^ seedModifier);
    for (unsigned t = first; t < first + count && t < ctx.numTiles; ++t) ctx.hwSeeds[t] = poplar_host::mix64(base + t);
  }, {});
}

} // namespace poprand
