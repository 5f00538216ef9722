// poplar-host: a CPU emulation of the public PopLibs API.
#ifndef popnn_BatchNorm_hpp
#define popnn_BatchNorm_hpp

#include <poplar/DebugContext.hpp>
#include <poplar/Graph.hpp>
#include <poplar/OptionFlags.hpp>
#include <poplar/Program.hpp>
#include <poplar/Tensor.hpp>
#include <poplar/Type.hpp>

#include <utility>

// Batch normalisation of activations [N][C][...field...] (rank 2 or more, channels in dimension
// 1): every per-channel value (mean, inverse standard deviation, gamma, beta, deltas) is a
// vector [C], and a channel's statistics run over N and the field. Activations are float or
// half; the per-channel vectors float or half. Options are accepted and ignored (PopLibs has
// none for batch norm). Each call is one step computed on the host: per-channel sums in double,
// rounded once to their type; element-wise results in float from the per-channel values.
// The distributed variants (distributedBatchNormStatistics, distributedBatchNormGradients) are
// not emulated and not declared here.
namespace popnn {
namespace bn {

/// The per-channel mean and inverse standard deviation 1 / sqrt(var + eps) of `acts`, as vectors
/// [C] of the activations' type. The variance divides by the number of elements per channel, or
/// by one less when `unbiasedVarEstimate` (which then needs more than one). The variance is
/// always taken about the mean (two passes), so `stableAlgo` changes nothing; `partialsType`
/// must be float or half and does not change the results.
std::pair<poplar::Tensor, poplar::Tensor>
batchNormStatistics(poplar::Graph &graph, const poplar::Tensor acts, float eps, poplar::program::Sequence &prog,
                    bool unbiasedVarEstimate, bool stableAlgo = false, const poplar::Type &partialsType = poplar::FLOAT,
                    const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});

/// (acts - mean) * invStdDev per channel: a new tensor like `acts`.
poplar::Tensor batchNormWhiten(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &mean,
                               const poplar::Tensor &invStdDev, poplar::program::Sequence &prog,
                               const poplar::DebugContext &debugContext = {},
                               const poplar::OptionFlags &options = {});

/// The normalised activations whitened * gamma + beta, and the whitened ones (as batchNormWhiten
/// gives them), in that order.
std::pair<poplar::Tensor, poplar::Tensor>
batchNormalise(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &gamma,
               const poplar::Tensor &beta, const poplar::Tensor &mean, const poplar::Tensor &invStdDev,
               poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
               const poplar::OptionFlags &options = {});

/// acts * combinedMultiplicand + addend per channel (the inference form: multiplicand
/// gamma * invStdDev, addend beta - gamma * mean * invStdDev).
poplar::Tensor batchNormalise(poplar::Graph &graph, const poplar::Tensor &acts,
                              const poplar::Tensor &combinedMultiplicand, const poplar::Tensor &addend,
                              poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                              const poplar::OptionFlags &options = {});

/// The gradients of gamma and beta, (gammaDelta, betaDelta): per channel the sums of
/// gradsIn * whitened and of gradsIn, vectors [C] of the type of `gradsIn` (shaped like `acts`).
/// The activations are whitened with `mean` and `iStdDev` on the way.
std::pair<poplar::Tensor, poplar::Tensor>
batchNormParamGradients(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &gradsIn,
                        const poplar::Tensor &mean, const poplar::Tensor &iStdDev, poplar::program::Sequence &prog,
                        const poplar::Type &partialsType = poplar::FLOAT,
                        const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});

/// As above, from activations already whitened.
std::pair<poplar::Tensor, poplar::Tensor>
batchNormParamGradients(poplar::Graph &graph, const poplar::Tensor &actsWhitened, const poplar::Tensor &gradsIn,
                        poplar::program::Sequence &prog, const poplar::Type &partialsType = poplar::FLOAT,
                        const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});

/// The gradient with respect to the activations through the whole layer, the batch statistics
/// included: with x the whitened activations and means per channel over N and the field,
/// gamma * invStdDev * (gradsIn - mean(gradsIn) - x * mean(gradsIn * x)). A new tensor like
/// `acts`.
poplar::Tensor batchNormGradients(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &gradsIn,
                                  const poplar::Tensor &mean, const poplar::Tensor &invStdDev,
                                  const poplar::Tensor &gamma, poplar::program::Sequence &prog,
                                  const poplar::Type &partialsType = poplar::FLOAT,
                                  const poplar::DebugContext &debugContext = {},
                                  const poplar::OptionFlags &options = {});

/// As above, from activations already whitened.
poplar::Tensor batchNormGradients(poplar::Graph &graph, const poplar::Tensor &actsWhitened,
                                  const poplar::Tensor &gradsIn, const poplar::Tensor &invStdDev,
                                  const poplar::Tensor &gamma, poplar::program::Sequence &prog,
                                  const poplar::Type &partialsType = poplar::FLOAT,
                                  const poplar::DebugContext &debugContext = {},
                                  const poplar::OptionFlags &options = {});

/// gamma += gammaDelta * scale and beta += betaDelta * scale, in place (a descent step passes a
/// negative scale).
void batchNormParamUpdate(poplar::Graph &graph, const poplar::Tensor &gammaDelta, const poplar::Tensor &betaDelta,
                          float scale, poplar::Tensor &gamma, poplar::Tensor &beta, poplar::program::Sequence &prog,
                          const poplar::DebugContext &debugContext = {}, const poplar::OptionFlags &options = {});

/// As above with the scale a tensor of one element (float or half), read when the step runs.
void batchNormParamUpdate(poplar::Graph &graph, const poplar::Tensor &gammaDelta, const poplar::Tensor &betaDelta,
                          const poplar::Tensor &scale, poplar::Tensor &gamma, poplar::Tensor &beta,
                          poplar::program::Sequence &prog, const poplar::DebugContext &debugContext = {},
                          const poplar::OptionFlags &options = {});

} // namespace bn
} // namespace popnn

#endif
