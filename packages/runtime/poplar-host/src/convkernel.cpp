// The float convolution (see convkernel.hpp) as a matrix product per conv group: the weights as
// an [Co][Ci*K] matrix, the inputs unfolded (im2col) into [Ci*K][images*outN] with zeros for
// padding, multiplied by gemmF32. Adding a product with a zero input changes no sum (a sum
// starting from +0 never becomes -0, and x + 0 = x), so this equals skipping the padding, as
// long as the weights are finite: otherwise 0 * inf would give NaN, and the direct loop runs.
#include "convkernel.hpp"

#include "gemm.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

// a fused multiply-add would skip the product's rounding, which the numerics keep
#pragma GCC optimize("fp-contract=off")

namespace poplar_host {
namespace {

/// Floats the unfolded inputs of one pass may take: images are unfolded a few at a time.
constexpr std::size_t kUnfoldFloats = std::size_t(1) << 21;

std::size_t weightIndex(const ConvGeometry &g, std::size_t grp, std::size_t o, std::size_t c) {
  return g.transposed ? ((grp * g.Ci + c) * g.Co + o) * g.kN : ((grp * g.Co + o) * g.Ci + c) * g.kN;
}

/// The direct loop: every output element gathers its inputs through the position tables.
void convolutionDirect(const ConvGeometry &g, const float *x, const float *w, float *y) {
  const std::size_t K = g.kernelPos.size();
  for (std::size_t n = 0; n < g.N; ++n)
    for (std::size_t grp = 0; grp < g.G; ++grp)
      for (std::size_t o = 0; o < g.Co; ++o) {
        float *acc = y + ((n * g.G + grp) * g.Co + o) * g.outN;
        std::fill(acc, acc + g.outN, 0.0f);
        for (std::size_t c = 0; c < g.Ci; ++c) {
          const float *xc = x + (n * g.G * g.Ci + grp * g.Ci + c) * g.inN;
          for (std::size_t k = 0; k < K; ++k) {
            const float wv = w[weightIndex(g, grp, o, c) + static_cast<std::size_t>(g.kernelPos[k])];
            const long *row = g.inputAt[k].data();
            for (std::size_t j = 0; j < g.outN; ++j)
              if (row[j] >= 0) acc[j] += xc[row[j]] * wv;
          }
        }
      }
}

} // namespace

void convolutionF32(const ConvGeometry &g, const float *x, const float *w, float *y) {
  const std::size_t K = g.kernelPos.size(), depth = g.Ci * K;
  const std::size_t wCount = g.G * g.Co * g.Ci * g.kN;
  for (std::size_t i = 0; i < wCount; ++i)
    if (!std::isfinite(w[i])) return convolutionDirect(g, x, w, y);
  if (g.outN == 0 || g.Co == 0) return;
  const std::size_t images = std::max<std::size_t>(1, std::min(g.N, kUnfoldFloats / std::max<std::size_t>(1, depth * g.outN)));
  ScratchLease scratch;
  float *wm = scratch.get(0, g.Co * depth);
  for (std::size_t grp = 0; grp < g.G; ++grp) {
    for (std::size_t o = 0; o < g.Co; ++o)
      for (std::size_t c = 0; c < g.Ci; ++c)
        for (std::size_t k = 0; k < K; ++k)
          wm[o * depth + c * K + k] = w[weightIndex(g, grp, o, c) + static_cast<std::size_t>(g.kernelPos[k])];
    for (std::size_t n0 = 0; n0 < g.N; n0 += images) {
      const std::size_t nb = std::min(images, g.N - n0), width = nb * g.outN;
      float *cols = scratch.get(1, depth * width);
      for (std::size_t c = 0; c < g.Ci; ++c)
        for (std::size_t k = 0; k < K; ++k) {
          const long *row = g.inputAt[k].data();
          float *dst = cols + (c * K + k) * width;
          for (std::size_t i = 0; i < nb; ++i) {
            const float *xc = x + ((n0 + i) * g.G * g.Ci + grp * g.Ci + c) * g.inN;
            float *d = dst + i * g.outN;
            for (std::size_t j = 0; j < g.outN; ++j) d[j] = row[j] >= 0 ? xc[row[j]] : 0.0f;
          }
        }
      if (nb == 1) { // straight into the output
        gemmF32(g.Co, width, depth, wm, depth, cols, width, y + (n0 * g.G + grp) * g.Co * g.outN, g.outN);
        continue;
      }
      float *prod = scratch.get(2, g.Co * width);
      gemmF32(g.Co, width, depth, wm, depth, cols, width, prod, width);
      for (std::size_t i = 0; i < nb; ++i)
        for (std::size_t o = 0; o < g.Co; ++o)
          std::memcpy(y + (((n0 + i) * g.G + grp) * g.Co + o) * g.outN, prod + o * width + i * g.outN,
                      g.outN * sizeof(float));
    }
  }
}

namespace {

/// The weight deltas' direct loop: every delta gathers its products through the position tables.
void weightDeltasDirect(const ConvGeometry &g, const float *dy, const float *x, float *dw) {
  const std::size_t K = g.kernelPos.size();
  std::fill(dw, dw + g.G * g.Co * g.Ci * g.kN, 0.0f);
  for (std::size_t grp = 0; grp < g.G; ++grp)
    for (std::size_t o = 0; o < g.Co; ++o)
      for (std::size_t c = 0; c < g.Ci; ++c)
        for (std::size_t k = 0; k < K; ++k) {
          const long *row = g.inputAt[k].data();
          float acc = 0.0f;
          for (std::size_t n = 0; n < g.N; ++n) {
            const float *xc = x + (n * g.G * g.Ci + grp * g.Ci + c) * g.inN;
            const float *zc = dy + (n * g.G * g.Co + grp * g.Co + o) * g.outN;
            for (std::size_t j = 0; j < g.outN; ++j)
              if (row[j] >= 0) acc += zc[j] * xc[row[j]];
          }
          dw[((grp * g.Co + o) * g.Ci + c) * g.kN + static_cast<std::size_t>(g.kernelPos[k])] = acc;
        }
}

} // namespace

// The weight deltas as a matrix product per conv group: dy as a [Co][N*outN] matrix times the
// inputs unfolded into [N*outN][Ci*K] (zeros for padding), so the sum over (n, j) runs in order.
// Zeros add nothing as long as dy is finite; otherwise the direct loop runs.
void weightDeltasF32(const ConvGeometry &g, const float *dy, const float *x, float *dw) {
  const std::size_t K = g.kernelPos.size(), depth = g.Ci * K, rows = g.N * g.outN;
  const std::size_t zCount = g.N * g.G * g.Co * g.outN;
  for (std::size_t i = 0; i < zCount; ++i)
    if (!std::isfinite(dy[i])) return weightDeltasDirect(g, dy, x, dw);
  std::fill(dw, dw + g.G * g.Co * g.Ci * g.kN, 0.0f);
  if (g.Co == 0 || depth == 0) return;
  ScratchLease scratch;
  float *zm = scratch.get(0, g.Co * rows), *prod = scratch.get(1, g.Co * depth);
  // columns of the unfolded inputs a pass takes
  const std::size_t width = std::max<std::size_t>(1, std::min(depth, kUnfoldFloats / std::max<std::size_t>(1, rows)));
  for (std::size_t grp = 0; grp < g.G; ++grp) {
    for (std::size_t o = 0; o < g.Co; ++o)
      for (std::size_t n = 0; n < g.N; ++n)
        std::memcpy(zm + o * rows + n * g.outN, dy + (n * g.G * g.Co + grp * g.Co + o) * g.outN, g.outN * sizeof(float));
    if (rows == 0) {
      std::fill(prod, prod + g.Co * depth, 0.0f);
    } else {
      for (std::size_t c0 = 0; c0 < depth; c0 += width) {
        const std::size_t cw = std::min(width, depth - c0);
        float *cols = scratch.get(2, rows * cw);
        for (std::size_t n = 0; n < g.N; ++n)
          for (std::size_t j = 0; j < g.outN; ++j) {
            float *dst = cols + (n * g.outN + j) * cw;
            for (std::size_t q = 0; q < cw; ++q) {
              const std::size_t c = (c0 + q) / K, k = (c0 + q) % K;
              const long at = g.inputAt[k][j];
              dst[q] = at >= 0 ? x[(n * g.G * g.Ci + grp * g.Ci + c) * g.inN + static_cast<std::size_t>(at)] : 0.0f;
            }
          }
        gemmF32(g.Co, cw, rows, zm, rows, cols, cw, prod + c0, depth);
      }
    }
    for (std::size_t o = 0; o < g.Co; ++o)
      for (std::size_t c = 0; c < g.Ci; ++c)
        for (std::size_t k = 0; k < K; ++k)
          dw[((grp * g.Co + o) * g.Ci + c) * g.kN + static_cast<std::size_t>(g.kernelPos[k])] = prod[o * depth + c * K + k];
  }
}

} // namespace poplar_host
