// popops::reduce's float steps, bit for bit against the plain loop of the documented numerics
// (each output starts from 0, or 1 for MUL, and takes its inputs in row-major order, every step
// rounded to float; SQUARE_ADD rounds the square first): per-channel sums over images (eight
// channels' rows transposed together, up to four such groups at once, runs longer and shorter
// than eight, channel counts that are not a multiple of eight), kept innermost dims, reduced
// dims that are not runs, for ADD, SQUARE_ADD, MUL, and MAX and MIN (exact; a NaN input gives
// NaN).
#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <popops/Reduce.hpp>
#include <popops/codelets.hpp>

#include "bit_cases.hpp"
#include "check.hpp"

#include <cmath>
#include <limits>
#include <random>

// the reference rounds every square, as the kernels do
#pragma GCC optimize("fp-contract=off")

using namespace poplar;
using namespace poplar::program;

namespace {

/// The plain loop: output o (kept dims, row-major) over its inputs (reduced dims, row-major).
std::vector<float> refReduce(const std::vector<std::size_t> &shape, const std::vector<std::size_t> &dims,
                             popops::Operation op, const std::vector<float> &x) {
  std::vector<bool> reduced(shape.size(), false);
  for (std::size_t d : dims) reduced[d] = true;
  std::size_t outN = 1;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d]) outN *= shape[d];
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> acc(outN, op == popops::Operation::MUL   ? 1.0f
                               : op == popops::Operation::MAX ? -inf
                               : op == popops::Operation::MIN ? inf
                                                              : 0.0f);
  std::vector<std::size_t> index(shape.size(), 0);
  // row-major over the input is row-major over the reduced dims for each output
  for (std::size_t e = 0; e < x.size(); ++e) {
    std::size_t o = 0;
    for (std::size_t d = 0; d < shape.size(); ++d)
      if (!reduced[d]) o = o * shape[d] + index[d];
    const float v = x[e];
    float &a = acc[o];
    if (op == popops::Operation::ADD) a = a + v;
    else if (op == popops::Operation::SQUARE_ADD) a = a + v * v;
    else if (op == popops::Operation::MUL) a = a * v;
    else if (op == popops::Operation::MAX) a = std::isnan(v) || v > a ? v : a;
    else a = std::isnan(v) || v < a ? v : a;
    for (std::size_t d = shape.size(); d-- > 0;)
      if (++index[d] < shape[d]) break;
      else index[d] = 0;
  }
  return acc;
}

} // namespace

int main() {
  Device device = bitcases::attachedIpu();
  Graph graph(device.getTarget());
  popops::addCodelets(graph);
  Sequence prog;
  bitcases::Cases cases(graph);
  std::mt19937 rng(5);

  struct Case {
    std::vector<std::size_t> shape, dims;
  };
  const std::vector<Case> shapes = {
      {{4, 16, 8, 8}, {0, 2, 3}},  // batch-norm statistics: 16 channels (two groups of eight), runs of 64
      {{2, 40, 4, 5}, {0, 2, 3}},  // 40 channels: four groups at once, then one
      {{2, 24, 3, 4}, {0, 2, 3}},  // three groups
      {{3, 11, 5, 3}, {0, 2, 3}},  // 11 channels (eight, then three alone), runs of 15
      {{2, 9, 2, 3}, {0, 2, 3}},   // runs of 6: no whole block of eight
      {{37, 24}, {0}},             // the kept dim innermost: eight neighbours
      {{3, 16, 5, 4}, {0, 2}},     // reduced dims that are not runs (stride 4)
      {{2, 8, 33}, {2}},           // one run a channel, eight channels
      {{5, 7}, {0, 1}},            // everything to one output
  };
  const popops::Operation ops[] = {popops::Operation::ADD, popops::Operation::SQUARE_ADD, popops::Operation::MUL,
                                   popops::Operation::MAX, popops::Operation::MIN};
  const char *opNames[] = {"add", "square_add", "mul", "max", "min"};
  for (std::size_t s = 0; s < shapes.size(); ++s)
    for (std::size_t k = 0; k < 5; ++k) {
      std::size_t n = 1;
      for (std::size_t d : shapes[s].shape) n *= d;
      // products stay near 1 (values close to 1), sums see every rounding (values of all signs)
      std::vector<float> x = bitcases::randomFloats(rng, n);
      if (ops[k] == popops::Operation::MUL)
        for (auto &v : x) v = 1.0f + v / 64.0f;
      // extremes: an infinity and, in every other case, a NaN somewhere inside
      if (ops[k] == popops::Operation::MAX || ops[k] == popops::Operation::MIN) {
        x[n / 3] = ops[k] == popops::Operation::MAX ? std::numeric_limits<float>::infinity()
                                                   : -std::numeric_limits<float>::infinity();
        if (s % 2) x[n / 2 + 1] = std::numeric_limits<float>::quiet_NaN();
      }
      const std::string id = "r" + std::to_string(s) + opNames[k];
      Tensor in = cases.operand(id, shapes[s].shape, x);
      cases.expect(id, popops::reduce(graph, in, FLOAT, shapes[s].dims, ops[k], prog, id),
                   refReduce(shapes[s].shape, shapes[s].dims, ops[k], x));
    }
  cases.run(device, prog);
  return check::finish("reduce");
}
