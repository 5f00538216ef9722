// The tiles' floating-point behaviour (poplar/CSRFunctions.hpp). Each call adds
// a step that changes the mode of the graph's tiles for the running replica;
// vertices and PopLibs steps read it when they round (EngineNumerics.cpp).
#include "internal.hpp"

#include <poplar/CSRFunctions.hpp>
#include <poplar/exceptions.hpp>

namespace poplar_host {
namespace {

std::string nameOf(const poplar::DebugContext &dc, const char *op) {
  return dc.getPathName().empty() ? std::string(op) : dc.getPathName() + "/" + op;
}

/// The behaviour as one unsigned word (the tensor of getAndModifyFloatingPointBehaviour).
unsigned encode(const FpMode &m) {
  return (m.inv ? 1u : 0u) | (m.div0 ? 2u : 0u) | (m.oflo ? 4u : 0u) | (m.esr ? 8u : 0u) | (m.nanoo ? 16u : 0u) |
         (m.chosen ? 32u : 0u);
}
FpMode decode(unsigned w) {
  FpMode m;
  m.inv = w & 1u;
  m.div0 = w & 2u;
  m.oflo = w & 4u;
  m.esr = w & 8u;
  m.nanoo = w & 16u;
  m.chosen = w & 32u;
  return m;
}

/// Adds a step applying fn to the mode of every tile of `graph`. It touches no
/// tensor, so it runs alone: it may change the tiles of several IPUs.
void addModeStep(poplar::Graph &graph, poplar::program::Sequence &prog, const std::string &name,
                 std::function<void(ReplicaContext &, FpMode &)> fn) {
  const unsigned first = graph.getTileOffset(), count = graph.getTarget().getNumTiles();
  addHostStep(prog, name, [=](ReplicaContext &ctx) {
    for (unsigned t = first; t < first + count && t < ctx.numTiles; ++t) fn(ctx, ctx.fpModes[t]);
  }, {});
}

} // namespace
} // namespace poplar_host

namespace poplar {

using namespace poplar_host;

void setFloatingPointBehaviour(Graph &graph, program::Sequence &prog, const FloatingPointBehaviour &b,
                               const DebugContext &debugContext) {
  FpMode m;
  m.inv = b.inv;
  m.div0 = b.div0;
  m.oflo = b.oflo;
  m.esr = b.esr;
  m.nanoo = b.nanoo;
  m.chosen = true;
  addModeStep(graph, prog, nameOf(debugContext, "setFloatingPointBehaviour"),
              [m](ReplicaContext &, FpMode &tile) { tile = m; });
}

void setFloatingPointBehaviour(Graph &graph, program::Sequence &prog, const Tensor &behaviour,
                               const DebugContext &debugContext) {
  if (behaviour.elementType() != UNSIGNED_INT || behaviour.numElements() != 1)
    throw poplar_error("setFloatingPointBehaviour: the behaviour tensor must be one returned by "
                       "getAndModifyFloatingPointBehaviour");
  addModeStep(graph, prog, nameOf(debugContext, "setFloatingPointBehaviour"),
              [behaviour](ReplicaContext &ctx, FpMode &tile) {
                tile = decode(static_cast<unsigned>(ctx.read(behaviour)[0]));
              });
}

void setStochasticRounding(Graph &graph, program::Sequence &prog, bool behaviour, const DebugContext &debugContext) {
  addModeStep(graph, prog, nameOf(debugContext, "setStochasticRounding"),
              [behaviour](ReplicaContext &, FpMode &tile) { tile.esr = behaviour; });
}

Tensor getAndModifyFloatingPointBehaviour(Graph &graph, program::Sequence &prog, const FloatingPointBehaviour &clear,
                                          const FloatingPointBehaviour &set, const DebugContext &debugContext) {
  const std::string name = nameOf(debugContext, "getAndModifyFloatingPointBehaviour");
  Tensor saved = graph.addVariable(UNSIGNED_INT, {}, name);
  graph.setTileMapping(saved, 0);
  const unsigned first = graph.getTileOffset();
  // the saved word is written before any tile changes
  addHostStep(prog, name, [=](ReplicaContext &ctx) {
    if (first < ctx.numTiles) ctx.write(saved, {static_cast<double>(encode(ctx.fpModes[first]))});
  }, {});
  addModeStep(graph, prog, name, [clear, set](ReplicaContext &, FpMode &tile) {
    auto apply = [](bool v, bool c, bool s) { return (v && !c) || s; };
    tile.inv = apply(tile.inv, clear.inv, set.inv);
    tile.div0 = apply(tile.div0, clear.div0, set.div0);
    tile.oflo = apply(tile.oflo, clear.oflo, set.oflo);
    tile.esr = apply(tile.esr, clear.esr, set.esr);
    tile.nanoo = apply(tile.nanoo, clear.nanoo, set.nanoo);
    tile.chosen = true;
  });
  return saved;
}

} // namespace poplar
