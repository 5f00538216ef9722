// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef popops_Reduce_hpp
#define popops_Reduce_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <popops/Operation.hpp>
#include <poputil/exceptions.hpp>

#include <vector>

namespace popops {

/// The operation of a reduction; with update the result is added to the
/// output, with a scale tensor the result is multiplied by it (ADD and
/// SQUARE_ADD only).
struct ReduceParams {
  ReduceParams() = default;
  ReduceParams(Operation op, bool update = false) : op(op), update(update), useScale(false) {}
  ReduceParams(Operation op, bool update, poplar::Tensor scale)
      : op(op), update(update), useScale(true), scale(scale) {}
  ReduceParams(Operation op, float constantScale, bool update = false) = delete;

  Operation op = Operation::ADD;
  bool update = false;
  bool useScale = false;
  poplar::Tensor scale;
};

/// Reduces `in` over `dims`; the result has the remaining dimensions in
/// order (a scalar when all are reduced). The emulation accumulates in double
/// and rounds the result to outType.
poplar::Tensor reduce(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Type &outType,
                      const std::vector<std::size_t> &dims, ReduceParams params, poplar::program::Sequence &prog,
                      const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});
poplar::Tensor reduce(poplar::Graph &graph, const poplar::Tensor &in, const std::vector<std::size_t> &dims,
                      ReduceParams params, poplar::program::Sequence &prog,
                      const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});
/// As reduce, into an existing output (mapped linearly if it has no mapping).
void reduceWithOutput(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Tensor &out,
                      const std::vector<std::size_t> &dims, ReduceParams params, poplar::program::Sequence &prog,
                      const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});

} // namespace popops

#endif
