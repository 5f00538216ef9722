// poplar-host: a CPU emulation of the public Poplar API.
#ifndef poplar_CSRFunctions_hpp
#define poplar_CSRFunctions_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Program.hpp>

namespace poplar {

/// Floating-point exception and rounding settings of the tiles. The CPU
/// keeps IEEE defaults (no exceptions, round to nearest), so these record
/// nothing.
struct FloatingPointBehaviour {
  FloatingPointBehaviour(bool inv = true, bool div0 = true, bool oflo = true, bool esr = false, bool nanoo = true)
      : inv(inv), div0(div0), oflo(oflo), esr(esr), nanoo(nanoo) {}
  bool inv, div0, oflo, esr, nanoo;
};

inline void setFloatingPointBehaviour(Graph &, program::Sequence &, const FloatingPointBehaviour &,
                                      const DebugContext & = {}) {}
inline void setStochasticRounding(Graph &, program::Sequence &, bool, const DebugContext & = {}) {}

} // namespace poplar

#endif
