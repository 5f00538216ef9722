// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef poplin_Convolution_hpp
#define poplin_Convolution_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplin/ConvParams.hpp>
#include <poplin/MatMul.hpp>

namespace poplin {

/// Weights [G, Cout/G, Cin/G, k...] for the convolution, mapped linearly.
poplar::Tensor createWeights(poplar::Graph &graph, const ConvParams &params,
                             const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {},
                             PlanningCache *cache = nullptr);
/// Input [N, G*Cin/G, field...] for the convolution, mapped linearly.
poplar::Tensor createInput(poplar::Graph &graph, const ConvParams &params,
                           const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {},
                           PlanningCache *cache = nullptr);

/// The convolution (cross-correlation, as in every DL framework) of
/// in [N, G*Cin, field...] with weights [G, Cout, Cin, k...], giving
/// [N, G*Cout, outField...] of params.outputType. With
/// transposeAndFlipWeights the weights are given as [G, Cin, Cout, k...] and
/// are flipped in every spatial dimension (the backward pass of a forward
/// convolution with those weights). The emulation accumulates in double and
/// rounds once.
poplar::Tensor convolution(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Tensor &weights,
                           const ConvParams &params, bool transposeAndFlipWeights, poplar::program::Sequence &prog,
                           const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {},
                           PlanningCache *cache = nullptr);

/// The weight deltas (gradients with respect to the weights) of the convolution with the forward
/// params: from zDeltas [N, G*Cout, outField...] (the gradients of its output, params.outputType)
/// and activations [N, G*Cin, field...] (its input, params.inputType), a tensor shaped like the
/// weights, [G, Cout, Cin, k...], of params.inputType, summed in the partials type. The `pass`
/// option (TRAINING_WU as frameworks set it) is checked and only plans.
poplar::Tensor calculateWeightDeltas(poplar::Graph &graph, const poplar::Tensor &zDeltas,
                                     const poplar::Tensor &activations, const ConvParams &params,
                                     poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                                     const poplar::OptionFlags &options = {}, PlanningCache *cache = nullptr);

/// Biases [C] for activations [N, C, ...], mapped linearly.
poplar::Tensor createBiases(poplar::Graph &graph, const poplar::Tensor &acts,
                            const poplar::DebugContext &debugContext = {});
/// acts[n, c, ...] += biases[c].
void addBias(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &biases,
             poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {});

} // namespace poplin

#endif
