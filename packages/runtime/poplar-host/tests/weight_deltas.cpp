// poplin::calculateWeightDeltas from the forward ConvParams, bit for bit against a plain loop of
// the documented numerics (float partials: each delta starts from +0 and adds its products in
// order of sample, then output position, each with one fused multiply-add; taps
// on padding add nothing): padding (asymmetric, and whole windows in it), strides, input and
// kernel dilation, groups, a batch whose unfolded inputs take several passes, inputs read in
// place from zero-padded copies, a non-finite gradient next to padding, non-finite inputs; half
// operands with half partials on exact values; the result shape and type; the option `pass`
// checked as PopLibs checks it, and shapes and types refused.
#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplin/Convolution.hpp>
#include <poplin/codelets.hpp>
#include <popops/Cast.hpp>
#include <popops/codelets.hpp>
#include <poputil/TileMapping.hpp>
#include <poputil/exceptions.hpp>

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

std::mt19937 rng(7);

std::vector<float> randomFloats(std::size_t n) { return bitcases::randomFloats(rng, n); }

/// Small integers: every product and sum is exact in half.
std::vector<float> smallInts(std::size_t n) {
  std::uniform_int_distribution<int> d(-2, 2);
  std::vector<float> v(n);
  for (auto &x : v) x = float(d(rng));
  return v;
}

/// A 2-D forward convolution and its weight deltas by definition.
struct Conv {
  std::size_t N, G, Ci, Co, H, W, KH, KW;
  unsigned padT, padL, padB, padR, inDil, kDil, strideH, strideW;

  poplin::ConvParams params(const Type &type = FLOAT) const {
    poplin::ConvParams p(type, N, {H, W}, {KH, KW}, Ci, Co, G);
    p.inputTransform.paddingLower = {padT, padL};
    p.inputTransform.paddingUpper = {padB, padR};
    p.inputTransform.dilation = {inDil, inDil};
    p.kernelTransform.dilation = {kDil, kDil};
    p.outputTransform.stride = {strideH, strideW};
    return p;
  }
  std::size_t outH() const {
    return ((H - 1) * inDil + 1 + padT + padB - ((KH - 1) * kDil + 1)) / strideH + 1;
  }
  std::size_t outW() const {
    return ((W - 1) * inDil + 1 + padL + padR - ((KW - 1) * kDil + 1)) / strideW + 1;
  }

  /// dw[g][o][c][i][j] = sum over n, y, z of dy[n][g*Co+o][y][z] * in[n][g*Ci+c][tap], in that order.
  std::vector<float> deltas(const std::vector<float> &dy, const std::vector<float> &in) const {
    const std::size_t OH = outH(), OW = outW();
    auto source = [](long q, unsigned pad, unsigned dil, std::size_t size) -> long {
      q -= pad;
      if (q < 0 || q % dil != 0 || q / dil >= long(size)) return -1;
      return q / dil;
    };
    std::vector<float> dw(G * Co * Ci * KH * KW);
    for (std::size_t g = 0; g < G; ++g)
      for (std::size_t o = 0; o < Co; ++o)
        for (std::size_t c = 0; c < Ci; ++c)
          for (std::size_t i = 0; i < KH; ++i)
            for (std::size_t j = 0; j < KW; ++j) {
              float acc = 0.0f;
              for (std::size_t n = 0; n < N; ++n)
                for (std::size_t y = 0; y < OH; ++y)
                  for (std::size_t z = 0; z < OW; ++z) {
                    const long sy = source(long(y * strideH + i * kDil), padT, inDil, H);
                    const long sx = source(long(z * strideW + j * kDil), padL, inDil, W);
                    if (sy < 0 || sx < 0) continue;
                    acc = std::fma(dy[(((n * G + g) * Co + o) * OH + y) * OW + z],
                                   in[(((n * G + g) * Ci + c) * H + std::size_t(sy)) * W + std::size_t(sx)], acc);
                  }
              dw[(((g * Co + o) * Ci + c) * KH + i) * KW + j] = acc;
            }
    return dw;
  }
};

using bitcases::input;

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
  const OptionFlags wu{{"pass", "TRAINING_WU"}, {"partialsType", "float"}};

  const std::vector<Conv> convs = {
      // N  G  Ci Co H   W   KH KW pT pL pB pR iD kD sH sW
      {2, 1, 3, 4, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},     // same padding
      {3, 2, 2, 3, 6, 7, 3, 2, 1, 0, 2, 1, 1, 2, 2, 2},     // groups, kernel dilation, strides
      {1, 1, 2, 5, 4, 3, 2, 2, 2, 1, 1, 2, 2, 1, 1, 1},     // input dilation
      {2, 2, 1, 2, 2, 3, 2, 2, 3, 1, 2, 4, 1, 2, 2, 1},     // pads past the kernel: windows only in padding
      {1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 0, 0, 1, 1, 3, 3},     // the only window in the padding: zero
      {2, 1, 1, 2, 6, 5, 3, 2, 0, 0, 0, 0, 1, 1, 2, 2},     // a trailing row no window reads
      {8, 1, 64, 5, 32, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},  // sums over more products than a block of the kernel
      {3, 2, 4, 3, 40, 36, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2},  // images large enough for a product each, groups, strides
      {2, 1, 3, 2, 20, 20, 3, 3, 2, 0, 1, 3, 1, 1, 1, 1},   // asymmetric padding around images read one by one
      {3, 2, 7, 3, 9, 11, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},    // a panel of (c, k) columns across input channels
      // read in place from zero-padded channels-last inputs (no dilation): strides 2 and 3, asymmetric
      // strides and padding, padding no window reaches, kernels larger and smaller than the
      // stride, 1x1 kernels, groups, and rows of the matrix wider than a panel
      {3, 1, 3, 4, 11, 9, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2},
      {2, 2, 2, 3, 13, 10, 4, 2, 2, 1, 0, 2, 1, 1, 3, 2},
      {2, 1, 4, 3, 9, 8, 1, 1, 0, 0, 0, 0, 1, 1, 2, 2},
      {3, 1, 2, 2, 10, 11, 2, 2, 0, 1, 1, 0, 1, 1, 3, 3},
      {2, 3, 2, 3, 5, 6, 3, 3, 2, 2, 3, 1, 1, 1, 2, 1},
      {2, 1, 20, 3, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 1, 2},
      // channels-last copies eight channels by eight columns at a time, and the rest one by one
      {2, 2, 11, 3, 9, 19, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
      {1, 1, 16, 2, 8, 16, 3, 3, 0, 1, 2, 1, 1, 1, 2, 1},
      {2, 1, 9, 2, 3, 17, 2, 2, 1, 0, 1, 1, 2, 1, 1, 1},   // input dilation: the table path's copy
  };
  for (std::size_t i = 0; i < convs.size(); ++i) {
    const auto &c = convs[i];
    const std::string id = "wd" + std::to_string(i);
    const auto x = randomFloats(c.N * c.G * c.Ci * c.H * c.W);
    const auto dy = randomFloats(c.N * c.G * c.Co * c.outH() * c.outW());
    Tensor acts = operand(id + "x", {c.N, c.G * c.Ci, c.H, c.W}, x);
    Tensor z = operand(id + "z", {c.N, c.G * c.Co, c.outH(), c.outW()}, dy);
    Tensor dw = poplin::calculateWeightDeltas(graph, z, acts, c.params(), prog, id, wu);
    CHECK_VEC(dw.shape(), (std::vector<std::size_t>{c.G, c.Co, c.Ci, c.KH, c.KW}));
    CHECK(dw.elementType() == FLOAT);
    expect(id, dw, c.deltas(dy, x));
  }
  { // an infinite gradient whose taps near the corner fall on padding only for some kernel
    // elements: those deltas stay finite (padding adds nothing, not 0 * inf)
    const Conv c{1, 1, 1, 1, 3, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
    const auto x = randomFloats(9);
    auto dy = randomFloats(9);
    dy[0] = std::numeric_limits<float>::infinity();
    auto ref = c.deltas(dy, x);
    CHECK(std::isfinite(ref[0]));
    Tensor acts = operand("infx", {1, 1, 3, 3}, x), z = operand("infz", {1, 1, 3, 3}, dy);
    expect("infDeltas", poplin::calculateWeightDeltas(graph, z, acts, c.params(), prog, "infDeltas"), ref);
  }
  { // an infinite and a NaN input on the padded path: the deltas reading them are not finite,
    // the others are finite
    const Conv c{2, 1, 2, 2, 7, 6, 3, 3, 1, 1, 1, 1, 1, 1, 2, 2};
    auto x = randomFloats(2 * 2 * 7 * 6);
    const auto dy = randomFloats(2 * 2 * c.outH() * c.outW());
    x[0] = std::numeric_limits<float>::infinity();
    x[42 + 41] = std::numeric_limits<float>::quiet_NaN();
    auto ref = c.deltas(dy, x);
    CHECK(!std::isfinite(ref[4]) && std::isfinite(ref[0]));
    Tensor acts = operand("infPadX", {2, 2, 7, 6}, x), z = operand("infPadZ", {2, 2, c.outH(), c.outW()}, dy);
    expect("infPadDeltas", poplin::calculateWeightDeltas(graph, z, acts, c.params(), prog, "infPadDeltas", wu), ref);
  }
  { // half operands and half partials: exact on small integers, and the deltas are half
    const Conv c{3, 2, 2, 2, 5, 4, 2, 3, 1, 0, 1, 2, 1, 1, 2, 1};
    const auto x = smallInts(c.N * c.G * c.Ci * c.H * c.W);
    const auto dy = smallInts(c.N * c.G * c.Co * c.outH() * c.outW());
    Tensor acts = operand("hx", {c.N, c.G * c.Ci, c.H, c.W}, x, HALF);
    Tensor z = operand("hz", {c.N, c.G * c.Co, c.outH(), c.outW()}, dy, HALF);
    Tensor dw = poplin::calculateWeightDeltas(graph, z, acts, c.params(HALF), prog, "halfDeltas",
                                              {{"pass", "TRAINING_WU"}, {"partialsType", "half"}});
    CHECK(dw.elementType() == HALF);
    Tensor wide = popops::cast(graph, dw, FLOAT, prog, "halfDeltasWide");
    expect("halfDeltas", wide, c.deltas(dy, x));
  }

  { // options and operands refused as PopLibs refuses them
    const Conv c{1, 1, 1, 1, 3, 3, 2, 2, 0, 0, 0, 0, 1, 1, 1, 1};
    Tensor acts = input(graph, FLOAT, {1, 1, 3, 3}, "badx"), z = input(graph, FLOAT, {1, 1, 2, 2}, "badz");
    Sequence p;
    CHECK_THROWS(invalid_option, poplin::calculateWeightDeltas(graph, z, acts, c.params(), p, "bad", {{"pass", "TRAINING"}}),
                 "invalid value 'TRAINING' for option pass");
    for (const char *pass : {"NONE", "INFERENCE_FWD", "TRAINING_FWD", "TRAINING_BWD", "TRAINING_WU", "FC_TRAINING_WU"})
      poplin::calculateWeightDeltas(graph, z, acts, c.params(), p, "ok", {{"pass", pass}});
    CHECK_THROWS(invalid_option, poplin::convolution(graph, acts, input(graph, FLOAT, {1, 1, 1, 2, 2}, "badw"), c.params(), false, p, "bad", {{"pass", "WU"}}),
                 "for option pass");
    CHECK_THROWS(poputil::poplibs_error, poplin::calculateWeightDeltas(graph, acts, acts, c.params(), p), "zDeltas shape");
    CHECK_THROWS(poputil::poplibs_error, poplin::calculateWeightDeltas(graph, z, z, c.params(), p), "activations shape");
    CHECK_THROWS(poputil::poplibs_error,
                 poplin::calculateWeightDeltas(graph, input(graph, HALF, {1, 1, 2, 2}, "halfz"), acts, c.params(), p),
                 "zDeltas float");
  }

  cases.run(device, prog);
  return check::finish("weight_deltas");
}
