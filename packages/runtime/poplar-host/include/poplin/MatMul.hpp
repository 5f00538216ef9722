// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef poplin_MatMul_hpp
#define poplin_MatMul_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>

#include <cstddef>
#include <vector>

namespace poplin {

/// Caches plans between calls; the emulation does no planning.
class PlanningCache {
public:
  PlanningCache() = default;
  std::size_t size() const { return 0; }
};

namespace matmul {
using PlanningCache = poplin::PlanningCache;
}

/// A[m,k] x B[k,n] -> [m,n] of outputType, mapped linearly. Options checked:
/// "availableMemoryProportion" (a number in [0, 1]) and "partialsType"
/// ("float" or "half"); the emulation accumulates in double and rounds the
/// result to outputType once.
poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::Type &outputType,
                      const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {},
                      PlanningCache *cache = nullptr);
poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                      const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);
/// C += k * A x B.
void matMulAcc(poplar::Graph &graph, const poplar::Tensor &C, float k, const poplar::Tensor &A,
               const poplar::Tensor &B, poplar::program::Sequence &prog,
               const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {},
               PlanningCache *cache = nullptr);
/// A[g,m,k] x B[g,k,n] -> [g,m,n].
poplar::Tensor matMulGrouped(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                             poplar::program::Sequence &prog, const poplar::Type &outputType,
                             const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {},
                             PlanningCache *cache = nullptr);

poplar::Tensor createMatMulInputLHS(poplar::Graph &graph, const poplar::Type &inputType,
                                    const poplar::Type &outputType, const std::vector<std::size_t> &aShape,
                                    const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &debugContext = {},
                                    const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);
poplar::Tensor createMatMulInputLHS(poplar::Graph &graph, const poplar::Type &dataType,
                                    const std::vector<std::size_t> &aShape, const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &debugContext = {},
                                    const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);
poplar::Tensor createMatMulInputRHS(poplar::Graph &graph, const poplar::Type &inputType,
                                    const poplar::Type &outputType, const std::vector<std::size_t> &aShape,
                                    const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &debugContext = {},
                                    const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);
poplar::Tensor createMatMulInputRHS(poplar::Graph &graph, const poplar::Type &dataType,
                                    const std::vector<std::size_t> &aShape, const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &debugContext = {},
                                    const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);
poplar::Tensor createMatMulGroupedInputLHS(poplar::Graph &graph, const poplar::Type &inputType,
                                           const poplar::Type &outputType, const std::vector<std::size_t> &aShape,
                                           const std::vector<std::size_t> &bShape,
                                           const poplar::DebugContext &debugContext = {},
                                           const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);
poplar::Tensor createMatMulGroupedInputRHS(poplar::Graph &graph, const poplar::Type &inputType,
                                           const poplar::Type &outputType, const std::vector<std::size_t> &aShape,
                                           const std::vector<std::size_t> &bShape,
                                           const poplar::DebugContext &debugContext = {},
                                           const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);

} // namespace poplin

#endif
