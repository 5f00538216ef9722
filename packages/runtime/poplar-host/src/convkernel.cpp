// The float convolution (see convkernel.hpp) as a matrix product per conv group: the weights as
// an [Co][Ci*K] matrix times the inputs unfolded (im2col) into [Ci*K][images*outN] with zeros for
// padding. A Plain2D convolution (zero padding, strides, kernel flips) unfolds nothing: every row
// of that matrix is a run of its zero-padded images (split into phase images when strided; see
// PhaseGrid), which gemmF32Rows reads where it lies, several small images a product. Any other
// convolution, or a Plain2D one whose grid would be mostly points that are not outputs, has
// gemmF32 take the unfolded inputs from a packer, panel by panel, as they are made. Adding a
// product with a zero input changes no sum (a sum starting from +0 never becomes -0, and
// x + 0 = x), so this equals skipping the padding, as long as the weights are finite: otherwise
// 0 * inf would give NaN, and the direct loop runs.
#include "convkernel.hpp"

#include "gemm.hpp"
#include "simd8.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

// every product is added with one explicit fused multiply-add (std::fma here, gemm.cpp's kernels);
// nothing else may be contracted
#pragma GCC optimize("fp-contract=off")

namespace poplar_host {
namespace {

/// Columns a convolution's product should have at least (output positions of its images).
constexpr std::size_t kColumnsPerProduct = 512;
/// Output positions per image from which a weight-delta product reads each image's gradients
/// where they lie rather than gathering all images into one matrix first.
constexpr std::size_t kRowsPerImageProduct = 256;

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
              if (row[j] >= 0) acc[j] = std::fma(xc[row[j]], wv, acc[j]);
          }
        }
      }
}


/// The weights as an [Co][Ci*K] matrix for conv group grp, in the order the sums take.
void weightMatrix(const ConvGeometry &g, const float *w, std::size_t grp, float *wm) {
  const std::size_t K = g.kernelPos.size(), depth = g.Ci * K;
  for (std::size_t o = 0; o < g.Co; ++o)
    for (std::size_t c = 0; c < g.Ci; ++c)
      for (std::size_t k = 0; k < K; ++k)
        wm[o * depth + c * K + k] = w[weightIndex(g, grp, o, c) + static_cast<std::size_t>(g.kernelPos[k])];
}

/// The phase images of a Plain2D convolution, nb images at a time. Padded input (r, s) (the
/// input at (r - padTop, s - padLeft), zero outside it) lies in phase (r % sy, s % sx) at
/// (r / sy, s / sx); each phase image is Hq x Wq (Hq = OH + (KH - 1) / sy, Wq = OW + (KW - 1) /
/// sx), zero past the padded image. Output (oh, ow) at kernel position (kh, kw) reads padded
/// (oh * sy + kh, ow * sx + kw): phase (kh % sy, kw % sx) at (oh + kh / sy, ow + kw / sx).
/// Laid out [channel][phase][image][row][column] with rows `pitch` = Wq - overlapW apart and
/// images Hp = Hq - overlapH rows apart: a row's last overlapW columns and an image's last
/// overlapH rows, padding in every phase, are the next row's first columns and the next image's
/// first rows, padding too (a 3x3 kernel's right and left zero columns are one column), so the
/// grid has fewer points that are not outputs. Taken as a grid of columns (image, row < Hp,
/// column < pitch), row (c, kh, kw) of the unfolded inputs is one run starting at rowStart:
/// grid points with row >= OH or column >= OW are not outputs (they read other values of the
/// buffer, and are dropped). With sy = sx = 1 there is one phase, the padded image itself.
struct PhaseGrid {
  std::size_t sy = 1, sx = 1, phases = 1, Hq = 0, Wq = 0, overlapH = 0, overlapW = 0, Hp = 0, pitch = 0, plane = 0,
              nb = 1, block = 0, size = 0;

  PhaseGrid(const ConvGeometry &g, std::size_t images) {
    const auto &q = g.plain;
    sy = q.strideH, sx = q.strideW, phases = sy * sx;
    Hq = q.OH + (q.KH - 1) / sy, Wq = q.OW + (q.KW - 1) / sx;
    // the zero rows and columns every phase a kernel position reads has at both ends
    overlapH = Hq - q.OH, overlapW = Wq - q.OW;
    for (std::size_t a = 0; a < std::min(sy, q.KH); ++a) {
      const auto [lo, hi] = dataRange(a, sy, q.padTop, q.H, Hq);
      overlapH = std::min({overlapH, lo, Hq - hi});
    }
    for (std::size_t b = 0; b < std::min(sx, q.KW); ++b) {
      const auto [lo, hi] = dataRange(b, sx, q.padLeft, q.W, Wq);
      overlapW = std::min({overlapW, lo, Wq - hi});
    }
    Hp = Hq - overlapH, pitch = Wq - overlapW, plane = Hp * pitch, nb = images;
    // the last image's overlapping rows and columns lie in its block
    block = nb * plane + overlapH * pitch + overlapW;
    // room after the last phase for its rows' overrun
    size = g.Ci * phases * block + (q.KH - 1) / sy * Wq + (q.KW - 1) / sx + kGemmRowOverrun;
  }
  /// The phase rows (or columns) [lo, hi) that hold inputs, of the n of phase a with stride s,
  /// padding pad before `in` inputs: lo = hi = n when there are none.
  static std::pair<std::size_t, std::size_t> dataRange(std::size_t a, std::size_t s, std::size_t pad, std::size_t in,
                                                       std::size_t n) {
    const std::size_t lo = std::min(n, pad > a ? (pad - a + s - 1) / s : 0);
    const std::size_t hi = std::min(n, (in + pad - a + s - 1) / s);
    return lo < hi ? std::make_pair(lo, hi) : std::make_pair(n, n);
  }
  /// Grid columns for `images` images: the last image's rows past OH are left out.
  std::size_t columns(const ConvGeometry &g, std::size_t images) const { return ((images - 1) * Hp + g.plain.OH) * pitch; }
  /// The grid column of output (oh, ow) of image i.
  std::size_t column(std::size_t i, std::size_t oh, std::size_t ow) const { return i * plane + oh * pitch + ow; }
  std::size_t rowStart(const ConvGeometry &g, std::size_t c, std::size_t k) const {
    const std::size_t kh = k / g.plain.KW, kw = k % g.plain.KW;
    return (c * phases + (kh % sy) * sx + kw % sx) * block + kh / sy * pitch + kw / sx;
  }
  /// Start of row (c, k) for every (c, k), in the order of the sums.
  std::vector<std::size_t> rowStarts(const ConvGeometry &g) const {
    const std::size_t K = g.kernelPos.size();
    std::vector<std::size_t> rows(g.Ci * K);
    for (std::size_t c = 0; c < g.Ci; ++c)
      for (std::size_t k = 0; k < K; ++k) rows[c * K + k] = rowStart(g, c, k);
    return rows;
  }
  /// Copies images n0 .. n0 + images - 1 of conv group grp into their phase images; the elements
  /// on padding are the same for every batch, so `buf` is zeroed once and they stay zero. Phases
  /// no kernel position reads (a kernel smaller than the stride) are left zero.
  void fill(const ConvGeometry &g, const float *x, std::size_t grp, std::size_t n0, std::size_t images, float *buf) const {
    const auto &q = g.plain;
    for (std::size_t i = 0; i < images; ++i)
      for (std::size_t c = 0; c < g.Ci; ++c) {
        const float *src = x + (((n0 + i) * g.G + grp) * g.Ci + c) * g.inN;
        for (std::size_t a = 0; a < std::min(sy, q.KH); ++a)
          for (std::size_t b = 0; b < std::min(sx, q.KW); ++b) {
            float *dst = buf + (c * phases + a * sx + b) * block + i * plane;
            // phase rows iq and columns jq whose inputs sy * iq + a - padTop, sx * jq + b - padLeft
            // lie in the image
            const auto [iLo, iHi] = dataRange(a, sy, q.padTop, q.H, Hq);
            const auto [jLo, jHi] = dataRange(b, sx, q.padLeft, q.W, Wq);
            for (std::size_t iq = iLo; iq < iHi && jLo < jHi; ++iq) {
              const float *in = src + (sy * iq + a - q.padTop) * q.W + (sx * jLo + b - q.padLeft);
              float *out = dst + iq * pitch + jLo;
              if (sx == 1) std::memcpy(out, in, (jHi - jLo) * sizeof(float));
              else if (sx == 2) simd8::everyOther(in, out, jHi - jLo);
              else
                for (std::size_t j = 0; j < jHi - jLo; ++j) out[j] = in[j * sx];
            }
          }
      }
  }
};

/// Images per product of a Plain2D convolution read from its phase images: enough for about
/// kColumnsPerProduct columns. 0 when the grid's points that are not outputs would more than
/// double the product (large kernels on small images): then the unfolding is cheaper.
std::size_t gridImages(const ConvGeometry &g) {
  if (!g.plain2D) return 0;
  const PhaseGrid one(g, 1);
  const std::size_t nb = std::max<std::size_t>(1, std::min(g.N, (kColumnsPerProduct + one.plane - 1) / one.plane));
  return one.columns(g, nb) <= 2 * nb * g.outN ? nb : 0;
}

/// A Plain2D convolution as products on its phase images (see PhaseGrid): same products, same
/// order, same zeros as the unfolded matrix, with nothing unfolded.
void convolutionGrid(const ConvGeometry &g, std::size_t images, const float *x, const float *w, float *y) {
  const auto &q = g.plain;
  const std::size_t depth = g.Ci * g.kernelPos.size();
  const PhaseGrid grid(g, images);
  const std::vector<std::size_t> rows = grid.rowStarts(g);
  ScratchLease scratch;
  float *wm = scratch.get(0, g.Co * depth);
  float *buf = scratch.get(1, grid.size);
  float *prod = scratch.get(2, g.Co * grid.columns(g, images));
  std::fill(buf, buf + grid.size, 0.0f);
  for (std::size_t grp = 0; grp < g.G; ++grp) {
    weightMatrix(g, w, grp, wm);
    for (std::size_t n0 = 0; n0 < g.N; n0 += images) {
      const std::size_t nb = std::min(images, g.N - n0), cols = grid.columns(g, nb);
      grid.fill(g, x, grp, n0, nb, buf);
      gemmF32Rows(g.Co, cols, depth, wm, depth, buf, rows.data(), prod, cols);
      for (std::size_t i = 0; i < nb; ++i) {
        float *out = y + ((n0 + i) * g.G + grp) * g.Co * g.outN;
        for (std::size_t o = 0; o < g.Co; ++o)
          for (std::size_t r = 0; r < q.OH; ++r)
            std::memcpy(out + (o * q.OH + r) * q.OW, prod + o * cols + grid.column(i, r, 0), q.OW * sizeof(float));
      }
    }
  }
}

} // namespace

std::vector<std::vector<long>> positionRuns(const ConvGeometry &g) {
  std::vector<std::vector<long>> runs(g.kernelPos.size(), std::vector<long>(g.outN));
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const long *row = g.inputAt[k].data();
    long *run = runs[k].data();
    for (std::size_t j = g.outN; j-- > 0;) {
      const bool last = j + 1 == g.outN;
      if (row[j] < 0) run[j] = !last && row[j + 1] < 0 ? run[j + 1] - 1 : -1;
      else run[j] = !last && row[j + 1] == row[j] + 1 ? run[j + 1] + 1 : 1;
    }
  }
  return runs;
}

void convolutionF32(const ConvGeometry &g, const float *x, const float *w, float *y) {
  const std::size_t K = g.kernelPos.size(), depth = g.Ci * K;
  const std::size_t wCount = g.G * g.Co * g.Ci * g.kN;
  if (!allFiniteF32(w, wCount)) return convolutionDirect(g, x, w, y);
  if (g.outN == 0 || g.Co == 0) return;
  if (const std::size_t images = gridImages(g)) return convolutionGrid(g, images, x, w, y);
  // small images are multiplied a few at a time, so a product has enough columns
  const std::size_t images = std::max<std::size_t>(1, std::min(g.N, kColumnsPerProduct / g.outN));
  ScratchLease scratch;
  float *wm = scratch.get(0, g.Co * depth);
  for (std::size_t grp = 0; grp < g.G; ++grp) {
    weightMatrix(g, w, grp, wm);
    for (std::size_t n0 = 0; n0 < g.N; n0 += images) {
      const std::size_t nb = std::min(images, g.N - n0), width = nb * g.outN;
      // the unfolded inputs, row (c, k), column (image, output position), written as panels, a
      // run of consecutive inputs (or of padding) at a time
      const PackB unfold = [&](std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc, std::size_t nr, float *out) {
        for (std::size_t jp = j0; jp < j0 + nc; jp += nr) {
          const std::size_t cols = std::min(nr, j0 + nc - jp);
          for (std::size_t p = p0; p < p0 + kc; ++p) {
            const long *row = g.inputAt[p % K].data(), *run = g.runs[p % K].data();
            std::size_t j = jp % g.outN;
            const float *xc = x + ((n0 + jp / g.outN) * g.G * g.Ci + grp * g.Ci + p / K) * g.inN;
            for (std::size_t l = 0; l < cols;) {
              const std::size_t len = std::min<std::size_t>(static_cast<std::size_t>(std::labs(run[j])), cols - l);
              // (runs of one, from strides or dilation, are stored directly rather than through a call)
              if (len == 1) out[l] = run[j] > 0 ? xc[row[j]] : 0.0f;
              else if (run[j] > 0) std::memcpy(out + l, xc + row[j], len * sizeof(float));
              else std::fill(out + l, out + l + len, 0.0f);
              l += len;
              if ((j += len) == g.outN) {
                j = 0;
                xc += g.G * g.Ci * g.inN;
              }
            }
            std::fill(out + cols, out + nr, 0.0f);
            out += nr;
          }
        }
      };
      if (nb == 1) { // straight into the output
        gemmF32(g.Co, width, depth, wm, depth, unfold, y + (n0 * g.G + grp) * g.Co * g.outN, g.outN);
        continue;
      }
      float *prod = scratch.get(1, g.Co * width);
      gemmF32(g.Co, width, depth, wm, depth, unfold, prod, width);
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
              if (row[j] >= 0) acc = std::fma(zc[j], xc[row[j]], acc);
          }
          dw[((grp * g.Co + o) * g.Ci + c) * g.kN + static_cast<std::size_t>(g.kernelPos[k])] = acc;
        }
}

/// The unfolded inputs of the weight deltas (row (image, output position), column (k, c)) as
/// panels, through the position tables, from the group's inputs channels-last ([image][input
/// element][channel]): a kernel position's channels lie side by side.
PackB unfoldChannelsLast(const ConvGeometry &g, const float *xt) {
  return [&g, xt](std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc, std::size_t nr, float *out) {
    for (std::size_t jp = j0; jp < j0 + nc; jp += nr) {
      const std::size_t cols = std::min(nr, j0 + nc - jp);
      for (std::size_t p = p0; p < p0 + kc; ++p) {
        const std::size_t j = p % g.outN;
        const float *xn = xt + (p / g.outN) * g.inN * g.Ci;
        for (std::size_t l = 0; l < cols;) {
          const std::size_t k = (jp + l) / g.Ci, c = (jp + l) % g.Ci, len = std::min(g.Ci - c, cols - l);
          const long at = g.inputAt[k][j];
          if (at >= 0) std::memcpy(out + l, xn + static_cast<std::size_t>(at) * g.Ci + c, len * sizeof(float));
          else std::fill(out + l, out + l + len, 0.0f);
          l += len;
        }
        std::fill(out + cols, out + nr, 0.0f);
        out += nr;
      }
    }
  };
}

/// The padded field a Plain2D convolution reads, Hr x Wr (Hr = (OH - 1) * strideH + KH).
std::size_t readRows(const ConvGeometry::Plain2D &q) { return (q.OH - 1) * q.strideH + q.KH; }
std::size_t readCols(const ConvGeometry::Plain2D &q) { return (q.OW - 1) * q.strideW + q.KW; }

/// dst[r * dstRow + s * channels + c] = src[c * plane + r * srcRow + s] for rows r < rows and
/// columns s < cols: channels-last. With AVX2, eight channels by eight columns at a time through
/// a transpose (a store per element, strided by the channels, was most of the weight deltas' own
/// time); without it, element by element (the eight-float shuffles would go through memory).
template <bool Blocks>
__attribute__((always_inline)) inline void channelsLastBody(const float *src, std::size_t plane, std::size_t channels,
                                                            std::size_t rows, std::size_t cols, std::size_t srcRow,
                                                            float *dst, std::size_t dstRow) {
  constexpr std::size_t B = 8;
  for (std::size_t r = 0; r < rows; ++r) {
    float *out = dst + r * dstRow;
    std::size_t c0 = 0;
    for (; Blocks && c0 + B <= channels; c0 += B) {
      const float *in = src + c0 * plane + r * srcRow;
      std::size_t s0 = 0;
      for (; s0 + B <= cols; s0 += B) {
        const float *const rows8[B] = {in + s0, in + plane + s0, in + 2 * plane + s0, in + 3 * plane + s0,
                                       in + 4 * plane + s0, in + 5 * plane + s0, in + 6 * plane + s0, in + 7 * plane + s0};
        simd8::transposeBlock8(rows8, out + s0 * channels + c0, channels);
      }
      for (; s0 < cols; ++s0)
        for (std::size_t j = 0; j < B; ++j) out[s0 * channels + c0 + j] = in[j * plane + s0];
    }
    for (; c0 < channels; ++c0)
      for (std::size_t s = 0; s < cols; ++s) out[s * channels + c0] = src[c0 * plane + r * srcRow + s];
  }
}

__attribute__((target("avx2"))) void channelsLastAvx2(const float *src, std::size_t plane, std::size_t channels,
                                                      std::size_t rows, std::size_t cols, std::size_t srcRow,
                                                      float *dst, std::size_t dstRow) {
  channelsLastBody<true>(src, plane, channels, rows, cols, srcRow, dst, dstRow);
}

void toChannelsLast(const float *src, std::size_t plane, std::size_t channels, std::size_t rows, std::size_t cols,
                    std::size_t srcRow, float *dst, std::size_t dstRow) {
#if defined(__x86_64__) || defined(__i386__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return channelsLastAvx2(src, plane, channels, rows, cols, srcRow, dst, dstRow);
#endif
  channelsLastBody<false>(src, plane, channels, rows, cols, srcRow, dst, dstRow);
}

} // namespace

// The weight deltas as a matrix product per conv group: dy as a [Co][N*outN] matrix times the
// inputs unfolded into [N*outN][Ci*K] (zeros for padding), so the sum over (n, j) runs in order;
// the unfolded inputs are the inputs channels-last: zero-padded and read where they lie for a
// Plain2D convolution, packed from them otherwise. Zeros add nothing as long as dy is finite;
// otherwise the direct loop runs.
void weightDeltasF32(const ConvGeometry &g, const float *dy, const float *x, float *dw) {
  const std::size_t K = g.kernelPos.size(), depth = g.Ci * K, rows = g.N * g.outN;
  const std::size_t zCount = g.N * g.G * g.Co * g.outN;
  if (!allFiniteF32(dy, zCount)) return weightDeltasDirect(g, dy, x, dw);
  std::fill(dw, dw + g.G * g.Co * g.Ci * g.kN, 0.0f);
  if (g.Co == 0 || depth == 0) return;
  const auto &q = g.plain;
  const bool padded = g.plain2D && g.outN > 0;
  const std::size_t Hr = padded ? readRows(q) : 0, Wr = padded ? readCols(q) : 0;
  const std::size_t xtCount = padded ? g.N * Hr * Wr * g.Ci : g.N * g.inN * g.Ci;
  // large images: dy's rows for one image and group ([Co][outN], contiguous) are A where they
  // lie, each image's products continuing the sums of the images before it (the same order over
  // (n, j)); small ones are gathered into one [Co][N*outN] matrix first, so a product is not a
  // handful of rows
  const bool perImage = padded && g.outN >= kRowsPerImageProduct;
  ScratchLease scratch;
  // (a product reading the padded inputs in place reads up to kGemmRowOverrun floats past a row)
  float *zm = scratch.get(0, perImage ? 0 : g.Co * rows), *prod = scratch.get(1, g.Co * depth),
        *xt = scratch.get(2, xtCount + kGemmRowOverrun);
  const std::size_t rowsIn = padded ? std::min(q.H, Hr - std::min(Hr, q.padTop)) : 0;
  const std::size_t colsIn = padded ? std::min(q.W, Wr - std::min(Wr, q.padLeft)) : 0;
  // only the padding is zeroed, once: the groups write the same interior elements
  if (padded) {
    const std::size_t rowFloats = Wr * g.Ci;
    for (std::size_t n = 0; n < g.N; ++n)
      for (std::size_t r = 0; r < Hr; ++r) {
        float *row = xt + (n * Hr + r) * rowFloats;
        if (r < q.padTop || r >= q.padTop + rowsIn) {
          std::fill(row, row + rowFloats, 0.0f);
          continue;
        }
        std::fill(row, row + std::min(Wr, q.padLeft) * g.Ci, 0.0f);
        std::fill(row + std::min(Wr, q.padLeft + colsIn) * g.Ci, row + rowFloats, 0.0f);
      }
    std::fill(xt + xtCount, xt + xtCount + kGemmRowOverrun, 0.0f);
  }
  const PackB unfold = padded ? PackB() : unfoldChannelsLast(g, xt);
  // Padded: row p of the unfolded inputs is, for each kernel row kh, a run of KW * Ci floats of
  // the padded channels-last inputs; each kernel row's columns are a product reading those runs
  // where they lie (the same sums, in the same order, as packing them first)
  std::vector<std::size_t> runAt;
  if (padded) {
    const std::size_t rowFloats = Wr * g.Ci, imageFloats = Hr * rowFloats;
    runAt.resize(rows);
    for (std::size_t p = 0; p < rows; ++p) {
      const std::size_t j = p % g.outN, oh = j / q.OW, ow = j % q.OW;
      runAt[p] = (p / g.outN) * imageFloats + oh * q.strideH * rowFloats + ow * q.strideW * g.Ci;
    }
  }
  for (std::size_t grp = 0; grp < g.G; ++grp) {
    if (!perImage)
      for (std::size_t o = 0; o < g.Co; ++o)
        for (std::size_t n = 0; n < g.N; ++n)
          std::memcpy(zm + o * rows + n * g.outN, dy + (n * g.G * g.Co + grp * g.Co + o) * g.outN, g.outN * sizeof(float));
    // the group's inputs channels-last, so the channels one kernel position reads lie side by side
    for (std::size_t n = 0; n < g.N; ++n) {
      const float *src = x + (n * g.G + grp) * g.Ci * g.inN;
      if (!padded) {
        toChannelsLast(src, g.inN, g.Ci, 1, g.inN, 0, xt + n * g.inN * g.Ci, 0);
        continue;
      }
      toChannelsLast(src, g.inN, g.Ci, rowsIn, colsIn, q.W, xt + ((n * Hr + q.padTop) * Wr + q.padLeft) * g.Ci,
                     Wr * g.Ci);
    }
    if (rows == 0) std::fill(prod, prod + g.Co * depth, 0.0f);
    else if (perImage) {
      const std::size_t run = q.KW * g.Ci, rowFloats = Wr * g.Ci;
      for (std::size_t n = 0; n < g.N; ++n) {
        const float *a = dy + (n * g.G + grp) * g.Co * g.outN;
        for (std::size_t kh = 0; kh < q.KH; ++kh)
          gemmF32Rows(g.Co, run, g.outN, a, g.outN, xt + kh * rowFloats, runAt.data() + n * g.outN, prod + kh * run,
                      depth, n > 0);
      }
    } else if (padded) {
      const std::size_t run = q.KW * g.Ci, rowFloats = Wr * g.Ci;
      for (std::size_t kh = 0; kh < q.KH; ++kh)
        gemmF32Rows(g.Co, run, rows, zm, rows, xt + kh * rowFloats, runAt.data(), prod + kh * run, depth);
    } else gemmF32(g.Co, depth, rows, zm, rows, unfold, prod, depth);
    for (std::size_t o = 0; o < g.Co; ++o)
      for (std::size_t k = 0; k < K; ++k)
        for (std::size_t c = 0; c < g.Ci; ++c)
          dw[((grp * g.Co + o) * g.Ci + c) * g.kN + static_cast<std::size_t>(g.kernelPos[k])] = prod[o * depth + k * g.Ci + c];
  }
}

} // namespace poplar_host
