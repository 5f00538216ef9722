// The blocked float kernels behind matMul, matMulGrouped, matMulAcc and convolution, bit for bit
// against the plain loops of the documented numerics (float partials: each output starts from
// +0 and adds its products in order, each with one fused multiply-add): K = 1, sizes
// that are not multiples of the kernel's register and cache blocks, groups, half operands, and
// convolutions with padding, strides, dilations, flips, transposeAndFlipWeights, one image or
// several images a product (unfolded, or read from padded and phase images), 3-D and 1-D fields,
// non-finite inputs on the padded path and non-finite weights next to padding.
#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplin/Convolution.hpp>
#include <poplin/MatMul.hpp>
#include <poplin/codelets.hpp>
#include <popops/codelets.hpp>
#include <poputil/TileMapping.hpp>

#include "bit_cases.hpp"
#include "check.hpp"

#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <random>

// the reference sums add each product with std::fma (one rounding), as the kernels do; nothing
// else here may be contracted
#pragma GCC optimize("fp-contract=off")

using namespace poplar;
using namespace poplar::program;

namespace {

std::mt19937 rng(99);

std::vector<float> randomFloats(std::size_t n) { return bitcases::randomFloats(rng, n); }

/// The sequential float sum of the documented numerics.
std::vector<float> refMatMul(std::size_t G, std::size_t m, std::size_t k, std::size_t n, const std::vector<float> &a,
                             const std::vector<float> &b) {
  std::vector<float> c(G * m * n);
  for (std::size_t g = 0; g < G; ++g)
    for (std::size_t i = 0; i < m; ++i)
      for (std::size_t j = 0; j < n; ++j) {
        float acc = 0.0f;
        for (std::size_t p = 0; p < k; ++p) {
          acc = std::fma(a[(g * m + i) * k + p], b[(g * k + p) * n + j], acc);
        }
        c[(g * m + i) * n + j] = acc;
      }
  return c;
}

/// A 2-D convolution with its transforms, summed in order of input channel, then kernel position
/// (row-major); positions on padding or between dilated inputs add nothing.
struct Conv {
  std::size_t N, G, Ci, Co, H, W, KH, KW;
  unsigned padT, padL, padB, padR, inDil, kDil, strideH, strideW;
  bool flipKernel, transposed;

  poplin::ConvParams params() const {
    poplin::ConvParams p(FLOAT, N, {H, W}, {KH, KW}, Ci, Co, G);
    p.inputTransform.paddingLower = {padT, padL};
    p.inputTransform.paddingUpper = {padB, padR};
    p.inputTransform.dilation = {inDil, inDil};
    p.kernelTransform.dilation = {kDil, kDil};
    p.kernelTransform.flip = {flipKernel, flipKernel};
    p.outputTransform.stride = {strideH, strideW};
    return p;
  }
  std::vector<std::size_t> weightShape() const {
    return transposed ? std::vector<std::size_t>{G, Ci, Co, KH, KW} : std::vector<std::size_t>{G, Co, Ci, KH, KW};
  }

  std::vector<float> run(const std::vector<float> &in, const std::vector<float> &w, std::size_t &OH,
                         std::size_t &OW) const {
    const long DH = long((H - 1) * inDil + 1 + padT + padB), DW = long((W - 1) * inDil + 1 + padL + padR);
    const long EKH = long((KH - 1) * kDil + 1), EKW = long((KW - 1) * kDil + 1);
    OH = std::size_t((DH - EKH) / strideH + 1);
    OW = std::size_t((DW - EKW) / strideW + 1);
    // input position of padded/dilated position q, or -1
    auto source = [](long q, unsigned pad, unsigned dil, std::size_t size) -> long {
      q -= pad;
      if (q < 0 || q % dil != 0 || q / dil >= long(size)) return -1;
      return q / dil;
    };
    std::vector<float> out(N * G * Co * OH * OW);
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t g = 0; g < G; ++g)
        for (std::size_t o = 0; o < Co; ++o)
          for (std::size_t y = 0; y < OH; ++y)
            for (std::size_t z = 0; z < OW; ++z) {
              float acc = 0.0f;
              for (std::size_t c = 0; c < Ci; ++c)
                for (std::size_t i = 0; i < KH; ++i)
                  for (std::size_t j = 0; j < KW; ++j) {
                    // transformed kernel position (i, j) holds kernel element (ki, kj)
                    std::size_t ki = flipKernel ? KH - 1 - i : i, kj = flipKernel ? KW - 1 - j : j;
                    if (transposed) ki = KH - 1 - ki, kj = KW - 1 - kj;
                    const long sy = source(long(y * strideH + i * kDil), padT, inDil, H);
                    const long sx = source(long(z * strideW + j * kDil), padL, inDil, W);
                    if (sy < 0 || sx < 0) continue;
                    const float wv = transposed ? w[(((g * Ci + c) * Co + o) * KH + ki) * KW + kj]
                                                : w[(((g * Co + o) * Ci + c) * KH + ki) * KW + kj];
                    acc = std::fma(in[(((n * G + g) * Ci + c) * H + std::size_t(sy)) * W + std::size_t(sx)], wv, acc);
                  }
              out[(((n * G + g) * Co + o) * OH + y) * OW + z] = acc;
            }
    return out;
  }
};

using bitcases::input;

std::vector<float> halves(std::vector<float> v) {
  // values a half holds exactly: multiples of 1/64 in [-2, 2]
  for (auto &x : v) x = std::round(x * 64.0f) / 64.0f;
  return v;
}

} // namespace

int main() {
  Device device = bitcases::attachedIpu();
  Graph graph(device.getTarget());
  popops::addCodelets(graph);
  poplin::addCodelets(graph);
  Sequence prog;
  bitcases::Cases cases(graph);
  auto operand = [&](const std::string &name, std::vector<std::size_t> shape, const std::vector<float> &values,
                     const Type &type = FLOAT) { return cases.operand(name, std::move(shape), values, type); };
  auto expect = [&](const std::string &name, const Tensor &t, std::vector<float> values) { cases.expect(name, t, std::move(values)); };

  // --- matMul: K = 1, single rows and columns, sizes past the register block (6 x 16 / 4 x 8),
  // the row block (96), the product block (256) and the column block (2048)
  const std::vector<std::array<std::size_t, 3>> sizes = {{1, 1, 1},   {7, 1, 13},  {13, 7, 1},   {1, 40, 9},
                                                         {5, 17, 300}, {97, 33, 513}, {3, 2100, 2}, {64, 48, 784}};
  for (std::size_t s = 0; s < sizes.size(); ++s) {
    const auto [m, k, n] = sizes[s];
    const auto a = randomFloats(m * k), b = randomFloats(k * n);
    const std::string id = "mm" + std::to_string(s);
    Tensor A = operand(id + "a", {m, k}, a), B = operand(id + "b", {k, n}, b);
    expect(id, poplin::matMul(graph, A, B, prog, FLOAT, id), refMatMul(1, m, k, n, a, b));
  }
  { // grouped, odd sizes
    const std::size_t G = 3, m = 7, k = 19, n = 23;
    const auto a = randomFloats(G * m * k), b = randomFloats(G * k * n);
    Tensor A = operand("ga", {G, m, k}, a), B = operand("gb", {G, k, n}, b);
    expect("grouped", poplin::matMulGrouped(graph, A, B, prog, FLOAT, "grouped"), refMatMul(G, m, k, n, a, b));
  }
  { // half operands, float partials and output: the halves are read exactly
    const std::size_t m = 9, k = 33, n = 17;
    const auto a = halves(randomFloats(m * k)), b = halves(randomFloats(k * n));
    Tensor A = operand("ha", {m, k}, a, HALF), B = operand("hb", {k, n}, b, HALF);
    expect("halfIn", poplin::matMul(graph, A, B, prog, FLOAT, "halfIn"), refMatMul(1, m, k, n, a, b));
  }
  { // matMulAcc: C + 0.5 * A x B, the scaled add rounded once
    const std::size_t m = 10, k = 300, n = 21;
    const auto a = randomFloats(m * k), b = randomFloats(k * n), c0 = randomFloats(m * n);
    Tensor A = operand("acca", {m, k}, a), B = operand("accb", {k, n}, b), C = operand("accc", {m, n}, c0);
    poplin::matMulAcc(graph, C, 0.5f, A, B, prog, "acc");
    auto sum = refMatMul(1, m, k, n, a, b);
    for (std::size_t e = 0; e < sum.size(); ++e) sum[e] = float(double(c0[e]) + 0.5 * double(sum[e]));
    expect("acc", C, sum);
  }

  // --- convolution
  const std::vector<Conv> convs = {
      // N  G  Ci Co H   W   KH KW pT pL pB pR iD kD sH sW flip   transposed
      {2, 1, 3, 4, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false},   // same padding
      {3, 2, 2, 3, 6, 7, 3, 2, 1, 0, 2, 1, 1, 2, 2, 2, false, false},   // groups, kernel dilation, strides
      {1, 1, 2, 5, 4, 3, 2, 2, 2, 1, 1, 2, 2, 1, 1, 1, false, false},   // input dilation
      {2, 1, 3, 2, 4, 4, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, false, true},    // transposeAndFlipWeights
      {1, 2, 2, 3, 5, 4, 2, 3, 0, 1, 1, 0, 1, 1, 1, 2, true, true},     // kernel flip and transposed
      {1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1, false, false},   // a single product
      // unfolded (kernel dilation): an image a product, straight into y; several images a product,
      // panels across them
      {5, 1, 64, 7, 32, 32, 3, 3, 2, 2, 2, 2, 1, 2, 1, 1, false, false},
      {7, 2, 3, 9, 10, 10, 3, 3, 2, 2, 2, 2, 1, 2, 1, 1, false, false},
      // read from padded images (no dilation): uneven padding, groups and a flipped kernel; no
      // padding; transposeAndFlipWeights; a kernel as wide as the image (unfolded: its grid would
      // be mostly points that are not outputs)
      {2, 2, 3, 5, 20, 30, 3, 2, 2, 0, 1, 3, 1, 1, 1, 1, true, false},
      {1, 1, 2, 3, 24, 40, 5, 3, 0, 0, 0, 0, 1, 1, 1, 1, false, false},
      {1, 1, 4, 6, 24, 24, 3, 3, 2, 2, 2, 2, 1, 1, 1, 1, false, true},
      {2, 1, 2, 2, 30, 20, 2, 20, 1, 0, 0, 0, 1, 1, 1, 1, false, false},
      // several padded images a product (small images, odd sizes, the last product with fewer
      // images), groups and a flipped kernel
      {13, 1, 2, 3, 6, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false},
      {9, 2, 3, 4, 7, 9, 3, 2, 2, 0, 1, 1, 1, 1, 1, 1, true, false},
      // zero rows and columns shared by neighbouring rows and images: uneven padding (the smaller
      // side sets the overlap), and strided phases that all start and end with zeros
      {11, 1, 3, 4, 7, 8, 3, 3, 2, 1, 1, 2, 1, 1, 1, 1, false, false},
      {6, 1, 2, 3, 9, 9, 3, 3, 2, 2, 2, 2, 1, 1, 2, 2, false, false},
      // strided, read from phase images: strides 2 and 3, asymmetric strides and padding, kernels
      // larger and smaller than the stride, 1x1 kernels, groups, flips and transposed weights
      {4, 1, 3, 5, 11, 9, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2, false, false},
      {3, 2, 2, 3, 13, 10, 4, 2, 2, 1, 0, 2, 1, 1, 3, 2, true, false},
      {2, 1, 4, 3, 9, 8, 1, 1, 0, 0, 0, 0, 1, 1, 2, 2, false, false},
      {3, 1, 2, 2, 10, 11, 2, 2, 0, 1, 1, 0, 1, 1, 3, 3, false, true},
      {5, 3, 2, 3, 5, 6, 3, 3, 2, 2, 2, 1, 1, 1, 2, 1, false, true},
      {2, 1, 3, 4, 33, 31, 5, 3, 2, 1, 2, 1, 1, 1, 2, 2, false, false},
      // a large kernel on a small image: unfolded, as its grid would be mostly not outputs
      {3, 1, 2, 2, 6, 6, 5, 5, 0, 0, 0, 0, 1, 1, 1, 1, false, false},
  };
  for (std::size_t i = 0; i < convs.size(); ++i) {
    const auto &c = convs[i];
    const std::string id = "conv" + std::to_string(i);
    const auto x = randomFloats(c.N * c.G * c.Ci * c.H * c.W);
    const auto w = randomFloats(c.G * c.Ci * c.Co * c.KH * c.KW);
    Tensor in = operand(id + "x", {c.N, c.G * c.Ci, c.H, c.W}, x), wt = operand(id + "w", c.weightShape(), w);
    std::size_t OH = 0, OW = 0;
    auto ref = c.run(x, w, OH, OW);
    Tensor out = poplin::convolution(graph, in, wt, c.params(), c.transposed, prog, id);
    CHECK_EQ(out.dim(2) * out.dim(3), OH * OW);
    expect(id, out, ref);
  }
  // 3-D and 1-D fields: the same order of sums (input channel, then kernel position row-major)
  // written as a direct loop over any number of field dimensions
  struct ConvNd {
    std::size_t N, G, Ci, Co;
    std::vector<std::size_t> field, kernel;
    std::vector<unsigned> padLower, padUpper, kDil, stride;
  };
  const std::vector<ConvNd> convsNd = {
      {2, 2, 2, 3, {4, 5, 3}, {3, 2, 2}, {1, 0, 1}, {0, 1, 1}, {1, 2, 1}, {2, 1, 1}},
      {3, 1, 3, 2, {9}, {3}, {2}, {1}, {2}, {2}},
  };
  for (std::size_t i = 0; i < convsNd.size(); ++i) {
    const auto &c = convsNd[i];
    const std::string id = "convNd" + std::to_string(i);
    const std::size_t F = c.field.size();
    poplin::ConvParams p(FLOAT, c.N, c.field, c.kernel, c.Ci, c.Co, c.G);
    p.inputTransform.paddingLower = c.padLower;
    p.inputTransform.paddingUpper = c.padUpper;
    p.kernelTransform.dilation = c.kDil;
    p.outputTransform.stride = c.stride;
    std::vector<std::size_t> out(F);
    std::size_t inN = 1, kN = 1, outN = 1;
    for (std::size_t d = 0; d < F; ++d) {
      out[d] = (c.field[d] + c.padLower[d] + c.padUpper[d] - (c.kernel[d] - 1) * c.kDil[d] - 1) / c.stride[d] + 1;
      inN *= c.field[d], kN *= c.kernel[d], outN *= out[d];
    }
    const auto x = randomFloats(c.N * c.G * c.Ci * inN);
    const auto w = randomFloats(c.G * c.Co * c.Ci * kN);
    std::vector<float> ref(c.N * c.G * c.Co * outN);
    for (std::size_t n = 0; n < c.N; ++n)
      for (std::size_t g = 0; g < c.G; ++g)
        for (std::size_t o = 0; o < c.Co; ++o)
          for (std::size_t j = 0; j < outN; ++j) {
            float acc = 0.0f;
            for (std::size_t ch = 0; ch < c.Ci; ++ch)
              for (std::size_t k = 0; k < kN; ++k) {
                // row-major multi-indices of output position j and kernel position k
                long at = 0;
                bool inside = true;
                for (std::size_t d = 0, jr = j, kr = k, outStride = outN, kStride = kN; d < F; ++d) {
                  outStride /= out[d], kStride /= c.kernel[d];
                  const long q = long((jr / outStride) * c.stride[d] + (kr / kStride) * c.kDil[d]) - long(c.padLower[d]);
                  jr %= outStride, kr %= kStride;
                  inside = inside && q >= 0 && q < long(c.field[d]);
                  at = at * long(c.field[d]) + q;
                }
                if (!inside) continue;
                acc = std::fma(x[((n * c.G + g) * c.Ci + ch) * inN + std::size_t(at)], w[((g * c.Co + o) * c.Ci + ch) * kN + k], acc);
              }
            ref[((n * c.G + g) * c.Co + o) * outN + j] = acc;
          }
    std::vector<std::size_t> inShape{c.N, c.G * c.Ci}, wShape{c.G, c.Co, c.Ci};
    inShape.insert(inShape.end(), c.field.begin(), c.field.end());
    wShape.insert(wShape.end(), c.kernel.begin(), c.kernel.end());
    Tensor in = operand(id + "x", inShape, x), wt = operand(id + "w", wShape, w);
    Tensor y = poplin::convolution(graph, in, wt, p, false, prog, id);
    CHECK_EQ(y.rank(), F + 2);
    expect(id, y, ref);
  }
  { // an infinite weight whose products near the corners fall on padding only: those outputs stay
    // finite (padding adds nothing, not 0 * inf)
    const Conv c{1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false, false};
    const auto x = randomFloats(9);
    auto w = randomFloats(9);
    w[0] = std::numeric_limits<float>::infinity();
    Tensor in = operand("infx", {1, 1, 3, 3}, x), wt = operand("infw", c.weightShape(), w);
    std::size_t OH = 0, OW = 0;
    auto ref = c.run(x, w, OH, OW);
    CHECK(std::isfinite(ref[0]));
    expect("infConv", poplin::convolution(graph, in, wt, c.params(), false, prog, "infConv"), ref);
  }

  { // an infinite and a NaN input on the phase-image path: outputs reading them are not finite,
    // the others are finite (points of the grid that are not outputs are dropped)
    const Conv c{3, 1, 2, 2, 9, 8, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2, false, false};
    auto x = randomFloats(3 * 2 * 9 * 8);
    const auto w = randomFloats(2 * 2 * 9);
    x[5] = std::numeric_limits<float>::infinity();
    x[2 * 72 + 40] = std::numeric_limits<float>::quiet_NaN();
    Tensor in = operand("infGridX", {3, 2, 9, 8}, x), wt = operand("infGridW", c.weightShape(), w);
    std::size_t OH = 0, OW = 0;
    auto ref = c.run(x, w, OH, OW);
    CHECK(!std::isfinite(ref[2]) && std::isfinite(ref[ref.size() - 1]));
    expect("infGrid", poplin::convolution(graph, in, wt, c.params(), false, prog, "infGrid"), ref);
  }
  { // a NaN weight on a strided convolution: the direct loop, padding still adds nothing
    const Conv c{2, 1, 1, 2, 7, 7, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2, false, false};
    const auto x = randomFloats(2 * 49);
    auto w = randomFloats(2 * 9);
    w[0] = std::numeric_limits<float>::quiet_NaN();
    Tensor in = operand("nanStrideX", {2, 1, 7, 7}, x), wt = operand("nanStrideW", c.weightShape(), w);
    std::size_t OH = 0, OW = 0;
    auto ref = c.run(x, w, OH, OW);
    CHECK(std::isfinite(ref[0]) && !std::isfinite(ref[OW + 1]));
    expect("nanStride", poplin::convolution(graph, in, wt, c.params(), false, prog, "nanStride"), ref);
  }

  cases.run(device, prog);
  return check::finish("kernels");
}
