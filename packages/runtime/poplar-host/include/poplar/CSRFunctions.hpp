// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_CSRFunctions_hpp
#define poplar_CSRFunctions_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>

namespace poplar {

/// Floating-point behaviour of the tiles: trap on invalid operations (inv),
/// division by zero (div0) and overflow (oflo); stochastic rounding of half
/// results (esr); half overflow gives NaN (nanoo) instead of +-65504. A trap
/// makes Engine::run throw application_runtime_error. Until a program sets
/// the behaviour, the emulation's tiles keep IEEE results (overflow to
/// +-infinity, no traps); see poplar_host/Arithmetic.hpp.
struct FloatingPointBehaviour {
  FloatingPointBehaviour(bool inv = true, bool div0 = true, bool oflo = true, bool esr = false, bool nanoo = true)
      : inv(inv), div0(div0), oflo(oflo), esr(esr), nanoo(nanoo) {}
  bool inv, div0, oflo, esr, nanoo;
};

/// Sets the behaviour of the graph's tiles when `prog` runs.
void setFloatingPointBehaviour(Graph &graph, program::Sequence &prog, const FloatingPointBehaviour &behaviour,
                               const DebugContext &debugContext = {});
/// Restores a behaviour saved by getAndModifyFloatingPointBehaviour.
void setFloatingPointBehaviour(Graph &graph, program::Sequence &prog, const Tensor &behaviour,
                               const DebugContext &debugContext = {});
/// Turns stochastic rounding on or off on the graph's tiles, leaving the rest.
void setStochasticRounding(Graph &graph, program::Sequence &prog, bool behaviour,
                           const DebugContext &debugContext = {});
/// Returns (as a tensor) the behaviour of the graph's tiles, then clears the
/// settings true in `clear` and sets those true in `set`.
Tensor getAndModifyFloatingPointBehaviour(Graph &graph, program::Sequence &prog, const FloatingPointBehaviour &clear,
                                          const FloatingPointBehaviour &set, const DebugContext &debugContext = {});

} // namespace poplar

#endif
