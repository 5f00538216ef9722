// Numerics as the IPU computes them: matMul, convolution, reduce and
// multiUpdateAdd sum in their partials / accumulation type (sequentially, one
// rounding per step);
// half overflow gives infinity (tiles left as they are), +-65504 (nanoo off)
// or NaN (nanoo on); traps stop the program; stochastic rounding is unbiased
// and reproducible from the seed. Expected values come from the rounding
// functions below, not from the library.
// codelets: codelets/numerics.cpp
#include <poplar/CSRFunctions.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplin/Convolution.hpp>
#include <poplin/MatMul.hpp>
#include <poplin/codelets.hpp>
#include <popops/Cast.hpp>
#include <popops/DynamicSlice.hpp>
#include <popops/Reduce.hpp>
#include <popops/codelets.hpp>
#include <poprand/RandomGen.hpp>
#include <poprand/codelets.hpp>

#include "check.hpp"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <map>

using namespace poplar;
using namespace poplar::program;

namespace {

const double kInf = std::numeric_limits<double>::infinity();

/// x rounded to the nearest half (ties to even); overflow gives +-infinity.
double halfRN(double x) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  const double a = std::fabs(x);
  int e;
  std::frexp(a, &e);                                // a in [2^(e-1), 2^e)
  const double spacing = std::ldexp(1.0, std::max(e - 11, -24)); // 10 fraction bits; subnormals at 2^-24
  const double r = std::nearbyint(a / spacing) * spacing;
  return std::copysign(r > 65504 ? kInf : r, x);
}

/// A graph on a 4-tile IPU Model, its program, host inputs and outputs.
struct Harness {
  Graph g;
  Sequence prog;
  std::vector<std::pair<Tensor, std::vector<float>>> inputs;
  std::vector<std::pair<std::string, Tensor>> outputs;

  explicit Harness(const Target &t) : g(t) {
    popops::addCodelets(g);
    poplin::addCodelets(g);
    poprand::addCodelets(g);
    g.addCodelets("numerics.gp");
  }
  Tensor in(const Type &type, std::vector<std::size_t> shape, std::vector<float> values, unsigned tile = 0) {
    Tensor t = g.addVariable(type, shape, "in" + std::to_string(inputs.size()));
    g.setTileMapping(t, tile);
    g.createHostWrite("in" + std::to_string(inputs.size()), t);
    inputs.emplace_back(t, std::move(values));
    return t;
  }
  Tensor out(const std::string &name, const Tensor &t) {
    g.createHostRead(name, t);
    outputs.emplace_back(name, t);
    return t;
  }
  /// Writes the inputs, runs program 0 `runs` times and reads the outputs.
  std::map<std::string, std::vector<double>> run(Engine &e, unsigned runs = 1) {
    for (std::size_t i = 0; i < inputs.size(); ++i) {
      const auto &v = inputs[i].second;
      const std::string h = "in" + std::to_string(i);
      if (inputs[i].first.elementType() == HALF) {
        std::vector<std::uint16_t> bits(v.size());
        copyFloatToDeviceHalf(g.getTarget(), v.data(), bits.data(), v.size());
        e.writeTensor(h, bits.data(), bits.data() + bits.size());
      } else if (inputs[i].first.elementType() == UNSIGNED_INT) {
        std::vector<unsigned> u(v.begin(), v.end());
        e.writeTensor(h, u.data(), u.data() + u.size());
      } else {
        e.writeTensor(h, v.data(), v.data() + v.size());
      }
    }
    for (unsigned r = 0; r < runs; ++r) e.run(0);
    std::map<std::string, std::vector<double>> out;
    for (const auto &o : outputs) {
      std::vector<float> v(o.second.numElements());
      if (o.second.elementType() == HALF) {
        std::vector<std::uint16_t> bits(v.size());
        e.readTensor(o.first, bits.data(), bits.data() + bits.size());
        copyDeviceHalfToFloat(g.getTarget(), bits.data(), v.data(), v.size());
      } else {
        e.readTensor(o.first, v.data(), v.data() + v.size());
      }
      out[o.first] = std::vector<double>(v.begin(), v.end());
    }
    return out;
  }
};

/// Runs a harness on a fresh engine.
std::map<std::string, std::vector<double>> runOnce(Harness &h, const Device &device, const OptionFlags &opts = {},
                                                   unsigned runs = 1) {
  Engine e(h.g, h.prog, opts);
  e.load(device);
  return h.run(e, runs);
}

double mean(const std::vector<double> &v) {
  double s = 0;
  for (double x : v) s += x;
  return s / double(v.size());
}

bool onlyValues(const std::vector<double> &v, double a, double b) {
  for (double x : v)
    if (x != a && x != b) return false;
  return true;
}

} // namespace

int main() {
  IPUModel model;
  model.tilesPerIPU = 4;
  Device device = model.createDevice();
  const Target target = device.getTarget();

  // Half operands for the long dot products: ones, and values in [0.5, 1) whose half-partial
  // sum drops low bits once it passes 2048.
  const std::size_t K = 4096;
  std::vector<float> ones(K, 1.0f), mixed(K);
  for (std::size_t i = 0; i < K; ++i) mixed[i] = float(halfRN(0.5 + double((i * 37) % 97) / 194.0));
  double sumF = 0, sumH = 0;
  {
    float s = 0;
    for (std::size_t i = 0; i < K; ++i) {
      const float p = mixed[i] * 1.0f; // exact: a product of halves
      s = s + p;                      // float32 partials: one rounding per step
      sumH = halfRN(sumH + double(p)); // half partials
    }
    sumF = halfRN(double(s));
  }

  { // matMul: half inputs, partials float / half; a float output ignores half partials.
    Harness h(target);
    std::vector<float> aValues(ones);
    aValues.insert(aValues.end(), mixed.begin(), mixed.end());
    Tensor A = h.in(HALF, {2, K}, aValues), B = h.in(HALF, {K, 1}, ones);
    h.out("f", poplin::matMul(h.g, A, B, h.prog, HALF, "f", {{"partialsType", "float"}}));
    h.out("h", poplin::matMul(h.g, A, B, h.prog, HALF, "h", {{"partialsType", "half"}}));
    h.out("dflt", poplin::matMul(h.g, A, B, h.prog, HALF, "d"));
    h.out("toFloat", poplin::matMul(h.g, A, B, h.prog, FLOAT, "tf", {{"partialsType", "half"}}));
    Tensor GA = A.reshape({2, 1, K}), GB = B.reshape({1, K, 1}).broadcast(2, 0);
    h.out("grouped", poplin::matMulGrouped(h.g, GA, GB, h.prog, HALF, "g", {{"partialsType", "half"}}));
    auto r = runOnce(h, device);
    CHECK_VEC(r["f"], (std::vector<double>{4096, sumF}));
    CHECK_VEC(r["dflt"], (std::vector<double>{4096, sumF}));
    // 2048 + 1 is a tie between 2048 and 2050: to even, so the sum stops at 2048
    CHECK_VEC(r["h"], (std::vector<double>{2048, sumH}));
    CHECK_VEC(r["grouped"], (std::vector<double>{2048, sumH}));
    CHECK_EQ(r["toFloat"][0], 4096.0);
    CHECK(sumH != sumF); // the operands were chosen so that half partials lose bits
  }

  { // float partials are float32 arithmetic: 1e8 + 1 - 1e8 is 0 in float (1 in double).
    Harness h(target);
    Tensor A = h.in(FLOAT, {1, 3}, {1e8f, 1.0f, -1e8f}), B = h.in(FLOAT, {3, 1}, {1, 1, 1});
    h.out("mm", poplin::matMul(h.g, A, B, h.prog, FLOAT, "mm"));
    Tensor acc = h.in(FLOAT, {1, 1}, {0.5f});
    poplin::matMulAcc(h.g, acc, 2.0f, A, B, h.prog, "acc");
    h.out("acc", acc);
    h.out("sum", popops::reduce(h.g, A.flatten(), FLOAT, {0}, popops::Operation::ADD, h.prog, "sum"));
    // nine outputs at once, each summing 1e8, -1e8, 1 in row-major order of its inputs (1 in
    // that order, 0 in reverse or with the 1 second): down the columns of [3][9] (reducing
    // dim 0) and along the rows of [9][3] (dim 1)
    std::vector<float> cols, rows;
    for (float v : {1e8f, -1e8f, 1.0f}) cols.insert(cols.end(), 9, v);
    for (int i = 0; i < 9; ++i) rows.insert(rows.end(), {1e8f, -1e8f, 1.0f});
    h.out("cols", popops::reduce(h.g, h.in(FLOAT, {3, 9}, cols), FLOAT, {0}, popops::Operation::ADD, h.prog, "cols"));
    h.out("rows", popops::reduce(h.g, h.in(FLOAT, {9, 3}, rows), FLOAT, {1}, popops::Operation::ADD, h.prog, "rows"));
    // and over dims 0 and 2 of [2][9][3] (a batch norm's statistics): each output adds 1e8, -1e8,
    // 1 and then 1, 0, 0, which is 2 in row-major order (1 taking dim 2 before dim 0)
    std::vector<float> mixed;
    for (int c = 0; c < 9; ++c) mixed.insert(mixed.end(), {1e8f, -1e8f, 1.0f});
    for (int c = 0; c < 9; ++c) mixed.insert(mixed.end(), {1.0f, 0.0f, 0.0f});
    h.out("mixed", popops::reduce(h.g, h.in(FLOAT, {2, 9, 3}, mixed), FLOAT, {0, 2}, popops::Operation::ADD, h.prog, "mixed"));
    auto r = runOnce(h, device);
    CHECK_EQ(r["mm"][0], 0.0);
    CHECK_EQ(r["acc"][0], 0.5);
    CHECK_EQ(r["sum"][0], 0.0);
    CHECK(r["cols"] == std::vector<double>(9, 1.0));
    CHECK(r["rows"] == std::vector<double>(9, 1.0));
    CHECK(r["mixed"] == std::vector<double>(9, 2.0));
  }

  { // convolution: a 1x1 kernel over 3000 input channels of ones.
    Harness h(target);
    const std::size_t C = 3000;
    Tensor in = h.in(HALF, {1, C, 1, 1}, std::vector<float>(C, 1.0f));
    Tensor w = h.in(HALF, {1, 1, C, 1, 1}, std::vector<float>(C, 1.0f));
    poplin::ConvParams p(HALF, 1, {1, 1}, {1, 1}, C, 1, 1);
    h.out("f", poplin::convolution(h.g, in, w, p, false, h.prog, "cf", {{"partialsType", "float"}}));
    h.out("h", poplin::convolution(h.g, in, w, p, false, h.prog, "ch", {{"partialsType", "half"}}));
    auto r = runOnce(h, device);
    CHECK_EQ(r["f"][0], 3000.0);
    CHECK_EQ(r["h"][0], 2048.0);
  }

  { // reduce: a half ADD accumulates in float unless accumType says half.
    Harness h(target);
    Tensor x = h.in(HALF, {K}, mixed);
    h.out("dflt", popops::reduce(h.g, x, HALF, {0}, popops::Operation::ADD, h.prog, "r"));
    h.out("half", popops::reduce(h.g, x, HALF, {0}, popops::Operation::ADD, h.prog, "rh",
                                 {{"accumType.inVertex", "half"}}));
    h.out("toFloat", popops::reduce(h.g, x, FLOAT, {0}, popops::Operation::ADD, h.prog, "rf",
                                    {{"accumType.inVertex", "half"}}));
    CHECK_THROWS(poplar::invalid_option,
                 popops::reduce(h.g, x, HALF, {0}, popops::Operation::ADD, h.prog, "bad", {{"accumType.inVertex", "int"}}),
                 "accumType.inVertex");
    auto r = runOnce(h, device);
    CHECK_EQ(r["dflt"][0], sumF);
    CHECK_EQ(r["half"][0], sumH);
    float s = 0;
    for (float v : mixed) s += v;
    CHECK_EQ(r["toFloat"][0], double(s));
  }

  { // multiUpdateAdd rounds after every update: 2048 + 1 + 1 + 1 stays 2048 in half.
    Harness h(target);
    Tensor t = h.in(HALF, {2, 1}, {2048, 0});
    Tensor s = h.in(HALF, {3, 1, 1}, {1, 1, 1});
    Tensor idx = h.g.addConstant<unsigned>(UNSIGNED_INT, {3, 1}, {0, 0, 0});
    Tensor one = h.g.addConstant<float>(FLOAT, {}, 1.0f);
    h.g.setTileMapping(idx, 0);
    h.g.setTileMapping(one, 0);
    popops::multiUpdateAdd(h.g, t, s, idx, one, {0}, {1}, h.prog, popops::SlicePlan(), OptionFlags());
    h.out("t", t);
    auto r = runOnce(h, device);
    CHECK_VEC(r["t"], (std::vector<double>{2048, 0}));
  }

  { // A float matMul whose sum overflows: infinity on a tile that does not trap (the sums are not
    // even scanned for flags there), a floating-point exception on one that does.
    auto floatOverflow = [&](bool traps) {
      Harness h(target);
      if (traps) setFloatingPointBehaviour(h.g, h.prog, FloatingPointBehaviour(true, true, true, false, false));
      Tensor a = h.in(FLOAT, {1, 2}, {3e38f, 3e38f}), b = h.in(FLOAT, {2, 1}, {1, 1});
      h.out("mm", poplin::matMul(h.g, a, b, h.prog, FLOAT, "fmm"));
      return runOnce(h, device);
    };
    CHECK_EQ(floatOverflow(false)["mm"][0], kInf);
    CHECK_THROWS(poplar::application_runtime_error, floatOverflow(true), "floating point exception (overflow) in fmm");
  }

  // Half overflow under each behaviour: popops::cast, a half matMul and a vertex.
  auto overflowCase = [&](int behaviour, const OptionFlags &opts) {
    Harness h(target);
    if (behaviour == 1) setFloatingPointBehaviour(h.g, h.prog, FloatingPointBehaviour(false, false, false, false, false));
    if (behaviour == 2) setFloatingPointBehaviour(h.g, h.prog, FloatingPointBehaviour(false, false, false, false, true));
    if (behaviour == 3) setFloatingPointBehaviour(h.g, h.prog, FloatingPointBehaviour(true, true, true, false, true));
    Tensor f = h.in(FLOAT, {4}, {1e5f, -7e4f, 65519.0f, 1.5f});
    h.out("cast", popops::cast(h.g, f, HALF, h.prog, "cast"));
    Tensor a = h.in(HALF, {1, 2}, {300, 300}), b = h.in(HALF, {2, 1}, {300, 300});
    h.out("mm", poplin::matMul(h.g, a, b, h.prog, HALF, "mm"));
    Tensor x = h.in(HALF, {3}, {60000, -60000, 1}), y = h.in(HALF, {3}, {10000, -10000, 2});
    Tensor sum = h.g.addVariable(HALF, {3}, "sum");
    h.g.setTileMapping(sum, 1);
    ComputeSet cs = h.g.addComputeSet("add");
    VertexRef v = h.g.addVertex(cs, "HalfAdd", {{"a", x}, {"b", y}, {"out", sum}});
    h.g.setTileMapping(v, 1);
    h.prog.add(Execute(cs));
    h.out("vertex", sum);
    return runOnce(h, device, opts);
  };
  {
    auto ieee = overflowCase(0, {});
    CHECK_VEC(ieee["cast"], (std::vector<double>{kInf, -kInf, 65504, 1.5}));
    CHECK_EQ(ieee["mm"][0], kInf);
    CHECK_VEC(ieee["vertex"], (std::vector<double>{kInf, -kInf, 3}));
    auto saturate = overflowCase(1, {});
    CHECK_VEC(saturate["cast"], (std::vector<double>{65504, -65504, 65504, 1.5}));
    CHECK_EQ(saturate["mm"][0], 65504.0);
    CHECK_VEC(saturate["vertex"], (std::vector<double>{65504, -65504, 3}));
    auto nanoo = overflowCase(2, {});
    CHECK(std::isnan(nanoo["cast"][0]) && std::isnan(nanoo["cast"][1]) && nanoo["cast"][2] == 65504);
    CHECK(std::isnan(nanoo["mm"][0]));
    CHECK(std::isnan(nanoo["vertex"][0]) && std::isnan(nanoo["vertex"][1]) && nanoo["vertex"][2] == 3);
    CHECK_THROWS(poplar::application_runtime_error, overflowCase(3, {}), "floating point exception (invalid operation, overflow) in cast");
    // the engine options set the same state from the start
    auto nanOption = overflowCase(0, {{"debug.nanOverflowMode", "true"}});
    CHECK(std::isnan(nanOption["cast"][0]) && std::isnan(nanOption["vertex"][0]));
    auto quiet = overflowCase(0, {{"debug.floatPointOpException", "false"}});
    CHECK_EQ(quiet["cast"][0], 65504.0);
    CHECK_THROWS(poplar::application_runtime_error, overflowCase(0, {{"debug.floatPointOpException", "true"}}),
                 "floating point exception (overflow) in cast/cast on tile 0");
    CHECK_THROWS(poplar::invalid_option, overflowCase(0, {{"debug.floatPointOpException", "yes"}}),
                 "expected true or false");
    // POPLAR_ENGINE_OPTIONS applies over the program's options
    setenv("POPLAR_ENGINE_OPTIONS", "{\"debug.nanOverflowMode\": \"true\", \"debug.allowOutOfMemory\": true}", 1);
    auto fromEnv = overflowCase(0, {});
    CHECK(std::isnan(fromEnv["cast"][0]));
    setenv("POPLAR_ENGINE_OPTIONS", "{\"debug.nanOverflowMode\": ", 1);
    CHECK_THROWS(poplar::invalid_option, overflowCase(0, {}), "POPLAR_ENGINE_OPTIONS");
    unsetenv("POPLAR_ENGINE_OPTIONS");
  }

  { // Vertex float arithmetic traps by flag: overflow, divide by zero, invalid (0 / 0).
    auto floatCase = [&](FloatingPointBehaviour b, std::vector<float> av, std::vector<float> bv) {
      Harness h(target);
      setFloatingPointBehaviour(h.g, h.prog, b);
      Tensor a = h.in(FLOAT, {av.size()}, av, 2), bt = h.in(FLOAT, {bv.size()}, bv, 2);
      Tensor prod = h.g.addVariable(FLOAT, {av.size()}, "prod"), quot = h.g.addVariable(FLOAT, {av.size()}, "quot");
      h.g.setTileMapping(prod, 2);
      h.g.setTileMapping(quot, 2);
      ComputeSet cs = h.g.addComputeSet("ops");
      VertexRef v = h.g.addVertex(cs, "FloatOps", {{"a", a}, {"b", bt}, {"prod", prod}, {"quot", quot}});
      h.g.setTileMapping(v, 2);
      h.prog.add(Execute(cs));
      h.out("prod", prod);
      h.out("quot", quot);
      return runOnce(h, device);
    };
    const FloatingPointBehaviour none(false, false, false, false, false);
    auto r = floatCase(none, {1e30f, 1, 0}, {1e30f, 0, 0});
    CHECK_EQ(r["prod"][0], kInf);
    CHECK_EQ(r["quot"][1], kInf);
    CHECK(std::isnan(r["quot"][2]));
    CHECK_THROWS(poplar::application_runtime_error,
                 floatCase(FloatingPointBehaviour(false, false, true, false, false), {1e30f}, {1e30f}),
                 "floating point exception (overflow) in vertex 0 ('FloatOps' in compute set 'ops') on tile 2");
    CHECK_THROWS(poplar::application_runtime_error,
                 floatCase(FloatingPointBehaviour(false, true, false, false, false), {1}, {0}), "(divide by zero)");
    CHECK_THROWS(poplar::application_runtime_error,
                 floatCase(FloatingPointBehaviour(true, false, false, false, false), {0}, {0}), "(invalid operation)");
    auto fine = floatCase(FloatingPointBehaviour(true, true, true, false, true), {2, 3}, {4, 0.5f});
    CHECK_VEC(fine["prod"], (std::vector<double>{8, 1.5}));
  }

  { // A virtual graph's behaviour covers its own tiles only.
    Harness h(target);
    Graph low = h.g.createVirtualGraph(0, 2), high = h.g.createVirtualGraph(2, 4);
    setFloatingPointBehaviour(high, h.prog, FloatingPointBehaviour(false, false, false, false, false));
    Tensor f0 = h.in(FLOAT, {1}, {1e5f}, 0), f3 = h.in(FLOAT, {1}, {1e5f}, 3);
    h.out("low", popops::cast(h.g, f0, HALF, h.prog));
    h.out("high", popops::cast(h.g, f3, HALF, h.prog));
    auto r = runOnce(h, device);
    CHECK_EQ(r["low"][0], kInf);
    CHECK_EQ(r["high"][0], 65504.0);
    (void)low;
  }

  { // getAndModifyFloatingPointBehaviour saves the state; setFloatingPointBehaviour restores it.
    Harness h(target);
    Tensor f = h.in(FLOAT, {1}, {1e5f});
    setFloatingPointBehaviour(h.g, h.prog, FloatingPointBehaviour(false, false, false, false, false));
    Tensor saved = getAndModifyFloatingPointBehaviour(h.g, h.prog, FloatingPointBehaviour(false, false, false, false, false),
                                                      FloatingPointBehaviour(false, false, false, false, true));
    h.out("modified", popops::cast(h.g, f, HALF, h.prog));
    setFloatingPointBehaviour(h.g, h.prog, saved);
    h.out("restored", popops::cast(h.g, f, HALF, h.prog));
    auto r = runOnce(h, device);
    CHECK(std::isnan(r["modified"][0]));
    CHECK_EQ(r["restored"][0], 65504.0);
  }

  // Stochastic rounding: 1 + 2^-12 lies a quarter of the way from 1 to the next half, 1 + 2^-10.
  const double x = 1.0 + std::ldexp(1.0, -12), up = 1.0 + std::ldexp(1.0, -10);
  const std::size_t N = 20000;
  auto srCase = [&](bool sr, const OptionFlags &opts, int seed, unsigned runs) {
    Harness h(target);
    if (sr) setStochasticRounding(h.g, h.prog, true);
    if (seed >= 0) {
      Tensor s = h.in(UNSIGNED_INT, {2}, {float(seed), 0});
      poprand::setSeed(h.g, s, 0, h.prog);
    }
    Tensor f = h.in(FLOAT, {N}, std::vector<float>(N, float(x)), 1);
    h.out("cast", popops::cast(h.g, f, HALF, h.prog));
    Tensor a = h.in(HALF, {1, 2}, {1, 1}), b = h.in(HALF, {2, 1}, {1, float(std::ldexp(1.0, -12))});
    Tensor mm = poplin::matMul(h.g, a.broadcast(N, 0), b, h.prog, HALF, "mm");
    h.out("mm", mm);
    Tensor hx = h.in(HALF, {N}, std::vector<float>(N, 1.0f), 3), hy = h.in(HALF, {N}, std::vector<float>(N, float(x - 1)), 3);
    Tensor sum = h.g.addVariable(HALF, {N}, "sum");
    h.g.setTileMapping(sum, 3);
    ComputeSet cs = h.g.addComputeSet("add");
    VertexRef v = h.g.addVertex(cs, "HalfAdd", {{"a", hx}, {"b", hy}, {"out", sum}});
    h.g.setTileMapping(v, 3);
    h.prog.add(Execute(cs));
    h.out("vertex", sum);
    return runOnce(h, device, opts, runs);
  };
  {
    auto off = srCase(false, {}, -1, 1);
    CHECK(onlyValues(off["cast"], 1.0, 1.0) && onlyValues(off["mm"], 1.0, 1.0) && onlyValues(off["vertex"], 1.0, 1.0));
    auto on = srCase(true, {}, -1, 1);
    for (const char *what : {"cast", "mm", "vertex"}) {
      CHECK(onlyValues(on[what], 1.0, up));
      // the mean is x within about 6 standard deviations (2^-10 * sqrt(0.25 * 0.75 / N))
      CHECK_NEAR(mean(on[what]), x, 2e-5);
    }
    // the same seed reproduces the run; another seed, or another run of the same engine, differs
    CHECK(srCase(true, {}, -1, 1) == on);
    auto viaOption = srCase(false, {{"prng.enableStochasticRounding", "true"}}, -1, 1);
    CHECK(onlyValues(viaOption["vertex"], 1.0, up));
    CHECK_NEAR(mean(viaOption["vertex"]), x, 2e-5);
    auto seeded7 = srCase(true, {{"prng.seed", "7"}}, -1, 1);
    CHECK(seeded7 != on && onlyValues(seeded7["cast"], 1.0, up));
    CHECK(srCase(true, {{"prng.seed", "7"}}, -1, 1) == seeded7);
    auto twice = srCase(true, {}, -1, 2);
    CHECK(twice["cast"] != on["cast"] && twice["vertex"] != on["vertex"]);
    auto pr5 = srCase(true, {}, 5, 1), pr6 = srCase(true, {}, 6, 1);
    CHECK(pr5 != pr6 && pr5 != on);
    CHECK(srCase(true, {}, 5, 1) == pr5);
    // reseeding before every run repeats the run, as reseeding the IPU's generators does
    auto pr5twice = srCase(true, {}, 5, 2);
    CHECK(pr5twice == pr5);
  }

  return check::finish("numerics");
}
