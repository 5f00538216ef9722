// Float convolution for poplin::convolution's and poplin::calculateWeightDeltas' float-partials paths.
#ifndef POPLAR_HOST_CONVKERNEL_HPP
#define POPLAR_HOST_CONVKERNEL_HPP

#include <cstddef>
#include <vector>

namespace poplar_host {

/// A convolution's shape with its transforms resolved (by poplin::convolution, when the graph
/// is built): input [N][G*Ci][inN], weights [G][Co][Ci][kN] ([G][Ci][Co][kN] when transposed),
/// output [N][G*Co][outN].
struct ConvGeometry {
  std::size_t N = 0, G = 0, Ci = 0, Co = 0, inN = 0, outN = 0, kN = 0;
  bool transposed = false;
  /// Kernel element (flat, after any flip of transposeAndFlipWeights) of each kernel position
  /// that is not an inserted zero.
  std::vector<long> kernelPos;
  /// [position][output element]: the input element (flat within a channel) it reads, or -1 for
  /// padding.
  std::vector<std::vector<long>> inputAt;
  /// [position][output element]: n > 0 when elements j .. j + n - 1 read consecutive inputs, -n
  /// when they all fall on padding (runs end with the image); see positionRuns.
  std::vector<std::vector<long>> runs;
  /// A 2-D convolution whose only transforms are zero padding of the input, flips of the kernel
  /// and strides of the output (no dilation, no truncation): the tables above follow from these
  /// sizes, and convolutionF32 reads its unfolded inputs straight from zero-padded copies of the
  /// images, split into strideH x strideW phase images when strided.
  struct Plain2D {
    std::size_t H = 0, W = 0, KH = 0, KW = 0, padTop = 0, padLeft = 0, OH = 0, OW = 0, strideH = 1, strideW = 1;
  };
  bool plain2D = false;
  Plain2D plain;
};

/// The runs of inputAt, made once with the geometry: the unfolding copies a run at a time.
std::vector<std::vector<long>> positionRuns(const ConvGeometry &g);

/// y = the convolution in float: each output element starts from +0 and adds its products in
/// order of input channel, then kernel position, each with one fused multiply-add;
/// positions on padding add nothing. Bit for bit the plain loop's result.
void convolutionF32(const ConvGeometry &geo, const float *x, const float *w, float *y);

/// dw = the weight deltas of the convolution in float (weights layout [G][Co][Ci][kN]): each
/// element starts from +0 and adds dy[n][g*Co+o][j] * x[n][g*Ci+c][inputAt[k][j]] in order of
/// sample n, then output position j, each with one fused multiply-add; positions on
/// padding add nothing, and kernel elements no position reads are +0. Bit for bit the plain loop.
void weightDeltasF32(const ConvGeometry &geo, const float *dy, const float *x, float *dw);

} // namespace poplar_host

#endif
