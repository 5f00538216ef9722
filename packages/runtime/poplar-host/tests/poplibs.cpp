// PopLibs functions against naive loops: matMul / matMulGrouped, reduce,
// convolution (padding, stride, dilation, groups, transposed weights), cast
// and half rounding, zero / fill, dynamicSlice / dynamicUpdate, multiSlice /
// multiUpdateAdd.
#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplin/Convolution.hpp>
#include <poplin/MatMul.hpp>
#include <poplin/codelets.hpp>
#include <popops/Cast.hpp>
#include <popops/DynamicSlice.hpp>
#include <popops/Fill.hpp>
#include <popops/Reduce.hpp>
#include <popops/Zero.hpp>
#include <popops/codelets.hpp>
#include <poputil/TileMapping.hpp>

#include "check.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>

using namespace poplar;
using namespace poplar::program;

namespace {

std::mt19937 rng(1234);

std::vector<float> randomFloats(std::size_t n) {
  std::uniform_real_distribution<float> d(-2.f, 2.f);
  std::vector<float> v(n);
  for (auto &x : v) x = d(rng);
  return v;
}

/// A host-writable, host-readable input mapped linearly.
Tensor input(Graph &graph, const Type &type, std::vector<std::size_t> shape, const std::string &name) {
  Tensor t = graph.addVariable(type, shape, name);
  poputil::mapTensorLinearly(graph, t);
  graph.createHostWrite(name + "-w", t);
  return t;
}

float halfRound(double v) {
  // Reference rounding to half through the host conversion of a float that
  // holds the value exactly (all test values are floats).
  float f = static_cast<float>(v);
  std::uint16_t h;
  copyFloatToDeviceHalf(Target::createIPUTarget(1, "ipu2"), &f, &h, 1);
  float back;
  copyDeviceHalfToFloat(Target::createIPUTarget(1, "ipu2"), &h, &back, 1);
  return back;
}

/// A 2-D grouped convolution by definition: build the transformed input and
/// kernel explicitly, correlate, then stride.
struct Conv2D {
  std::size_t N, G, Ci, Co, H, W, KH, KW;
  unsigned padT, padL, padB, padR, inDil, kDil, strideH, strideW;
  bool transposed; // weights given as [G][Ci][Co][kh][kw] and flipped

  std::vector<float> run(const std::vector<float> &in, const std::vector<float> &w, std::size_t &OH,
                         std::size_t &OW) const {
    const std::size_t DH = (H - 1) * inDil + 1 + padT + padB, DW = (W - 1) * inDil + 1 + padL + padR;
    const std::size_t EKH = (KH - 1) * kDil + 1, EKW = (KW - 1) * kDil + 1;
    const std::size_t RH = DH - EKH + 1, RW = DW - EKW + 1;
    OH = (RH - 1) / strideH + 1;
    OW = (RW - 1) / strideW + 1;
    std::vector<float> out(N * G * Co * OH * OW);
    std::vector<double> x(DH * DW), k(EKH * EKW);
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t g = 0; g < G; ++g)
        for (std::size_t o = 0; o < Co; ++o) {
          std::vector<double> acc(RH * RW, 0.0);
          for (std::size_t c = 0; c < Ci; ++c) {
            std::fill(x.begin(), x.end(), 0.0);
            for (std::size_t i = 0; i < H; ++i)
              for (std::size_t j = 0; j < W; ++j)
                x[(padT + i * inDil) * DW + padL + j * inDil] = in[(((n * G + g) * Ci + c) * H + i) * W + j];
            std::fill(k.begin(), k.end(), 0.0);
            for (std::size_t i = 0; i < KH; ++i)
              for (std::size_t j = 0; j < KW; ++j) {
                const double wv = transposed ? w[(((g * Ci + c) * Co + o) * KH + (KH - 1 - i)) * KW + (KW - 1 - j)]
                                             : w[(((g * Co + o) * Ci + c) * KH + i) * KW + j];
                k[(i * kDil) * EKW + j * kDil] = wv;
              }
            for (std::size_t y = 0; y < RH; ++y)
              for (std::size_t z = 0; z < RW; ++z)
                for (std::size_t i = 0; i < EKH; ++i)
                  for (std::size_t j = 0; j < EKW; ++j) acc[y * RW + z] += x[(y + i) * DW + z + j] * k[i * EKW + j];
          }
          for (std::size_t y = 0; y < OH; ++y)
            for (std::size_t z = 0; z < OW; ++z)
              out[(((n * G + g) * Co + o) * OH + y) * OW + z] = float(acc[y * strideH * RW + z * strideW]);
        }
    return out;
  }

  poplin::ConvParams params() const {
    poplin::ConvParams p(FLOAT, N, {H, W}, {KH, KW}, Ci, Co, G);
    p.inputTransform.paddingLower = {padT, padL};
    p.inputTransform.paddingUpper = {padB, padR};
    p.inputTransform.dilation = {inDil, inDil};
    p.kernelTransform.dilation = {kDil, kDil};
    p.outputTransform.stride = {strideH, strideW};
    return p;
  }
};

bool near(const std::vector<float> &a, const std::vector<float> &b, double tol) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::fabs(double(a[i]) - double(b[i])) > tol * (1.0 + std::fabs(double(b[i])))) return false;
  return true;
}

} // namespace

int main() {
  auto devices = DeviceManager::createDeviceManager().getDevices(TargetType::IPU, 1);
  CHECK_EQ(devices.size(), 1u);
  Device device = std::move(devices.front());
  CHECK(device.attach());
  Graph graph(device.getTarget());
  popops::addCodelets(graph);
  poplin::addCodelets(graph);
  Sequence prog;
  std::vector<std::pair<std::string, Tensor>> reads;
  auto readBack = [&](const std::string &name, const Tensor &t) {
    graph.createHostRead(name, t);
    reads.emplace_back(name, t);
  };

  // --- matMul -------------------------------------------------------------------------
  Tensor A = input(graph, FLOAT, {3, 4}, "A"), B = input(graph, FLOAT, {4, 5}, "B");
  readBack("AB", poplin::matMul(graph, A, B, prog, FLOAT, "mm", {{"availableMemoryProportion", "0.3"},
                                                                    {"partialsType", "float"}}));
  readBack("ABh", poplin::matMul(graph, A, B, prog, HALF, "mmh"));
  Tensor GA = input(graph, FLOAT, {2, 3, 4}, "GA"), GB = input(graph, FLOAT, {2, 4, 2}, "GB");
  readBack("GAB", poplin::matMulGrouped(graph, GA, GB, prog, FLOAT, "mmg"));
  // B as the transpose of rows lying in runs (attention's keys: a head's rows inside wider rows,
  // and a plain matrix transposed): packed from the runs, the same sums as the loop below
  Tensor KQ = input(graph, FLOAT, {3, 50, 70}, "KQ"), KV = input(graph, FLOAT, {3, 100, 2, 70}, "KV");
  readBack("KQK", poplin::matMulGrouped(graph, KQ, KV.slice(1, 2, 2).squeeze({2}).dimShuffle({0, 2, 1}), prog, FLOAT, "keys"));
  Tensor KA = input(graph, FLOAT, {20, 33}, "KA"), KM = input(graph, FLOAT, {60, 33}, "KM");
  readBack("KAM", poplin::matMul(graph, KA, KM.transpose(), prog, FLOAT, "keysT"));
  CHECK_THROWS(poplar::invalid_option,
               poplin::matMul(graph, A, B, prog, FLOAT, "bad", {{"availableMemoryProportion", "2"}}),
               "availableMemoryProportion");
  CHECK_THROWS(poputil::poplibs_error, poplin::matMul(graph, A, A, prog, FLOAT), "cannot be multiplied");

  // --- reduce -------------------------------------------------------------------------
  Tensor R = input(graph, FLOAT, {2, 3, 4}, "R");
  readBack("sum1", popops::reduce(graph, R, FLOAT, {1}, popops::Operation::ADD, prog, "r1"));
  readBack("max02", popops::reduce(graph, R, {0, 2}, popops::ReduceParams(popops::Operation::MAX), prog));
  Tensor half_ = graph.addConstant<float>(FLOAT, {}, 0.5f);
  graph.setTileMapping(half_, 0);
  Tensor sq = popops::reduce(graph, R, FLOAT, {0, 1, 2}, popops::ReduceParams(popops::Operation::SQUARE_ADD, false, half_),
                             prog);
  CHECK_EQ(sq.rank(), 0u);
  readBack("sqAll", sq);
  Tensor acc = graph.addVariable(FLOAT, {4}, "acc");
  popops::zero(graph, acc, prog);
  popops::reduceWithOutput(graph, R, acc, {0, 1}, popops::ReduceParams(popops::Operation::ADD, true), prog);
  popops::reduceWithOutput(graph, R, acc, {0, 1}, popops::ReduceParams(popops::Operation::ADD, true), prog);
  readBack("acc", acc);
  readBack("mulH", popops::reduce(graph, R.slice(0, 1, 0), HALF, {2}, popops::Operation::MUL, prog));
  readBack("logadd", popops::reduce(graph, R.slice(0, 2, 2), {2}, popops::Operation::LOG_ADD, prog));
  Tensor bools = graph.addConstant<bool>(BOOL, {2, 2}, {true, false, true, true});
  graph.setTileMapping(bools, 0);
  readBack("and", popops::reduce(graph, bools, BOOL, {1}, popops::Operation::LOGICAL_AND, prog));
  CHECK_THROWS(poputil::poplibs_error, popops::reduce(graph, R, {3}, popops::Operation::ADD, prog), "out of range");

  // --- convolution --------------------------------------------------------------------
  std::vector<Conv2D> convs = {
      {2, 1, 3, 4, 5, 5, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1, false},
      {1, 2, 2, 3, 6, 7, 3, 2, 1, 0, 2, 1, 1, 2, 2, 2, false},
      {1, 1, 2, 2, 3, 3, 2, 2, 1, 1, 1, 1, 2, 1, 1, 1, true},
  };
  std::vector<std::vector<float>> convIn, convW;
  for (std::size_t i = 0; i < convs.size(); ++i) {
    const auto &c = convs[i];
    auto p = c.params();
    Tensor in = input(graph, FLOAT, {c.N, c.G * c.Ci, c.H, c.W}, "convIn" + std::to_string(i));
    std::vector<std::size_t> ws = c.transposed ? std::vector<std::size_t>{c.G, c.Ci, c.Co, c.KH, c.KW}
                                               : std::vector<std::size_t>{c.G, c.Co, c.Ci, c.KH, c.KW};
    Tensor w = input(graph, FLOAT, ws, "convW" + std::to_string(i));
    Tensor out = poplin::convolution(graph, in, w, p, c.transposed, prog, "conv" + std::to_string(i),
                                     {{"partialsType", "float"}});
    CHECK_EQ(out.dim(1), c.G * c.Co);
    readBack("conv" + std::to_string(i), out);
    convIn.push_back(randomFloats(in.numElements()));
    convW.push_back(randomFloats(w.numElements()));
  }
  {
    poplin::ConvParams bad(FLOAT, 1, {4, 4}, {3, 3}, 2, 2, 1);
    Tensor in = graph.addVariable(FLOAT, {1, 3, 4, 4}, "badIn");
    Tensor w = graph.addVariable(FLOAT, {1, 2, 2, 3, 3}, "badW");
    graph.setTileMapping(in, 0);
    graph.setTileMapping(w, 0);
    CHECK_THROWS(poputil::poplibs_error, poplin::convolution(graph, in, w, bad, false, prog), "input shape");
  }

  // --- cast, zero, fill ------------------------------------------------------------------
  std::vector<float> castValues = {1.0f, 1.00048828125f, 1.00146484375f, 65519.0f, 65520.0f, 1e-8f, 3e-8f, -2.5f};
  Tensor castSrc = input(graph, FLOAT, {castValues.size()}, "castSrc");
  Tensor asHalf = popops::cast(graph, castSrc, HALF, prog, "toHalf");
  readBack("backToFloat", popops::cast(graph, asHalf, FLOAT, prog));
  Tensor toIntSrc = graph.addConstant<float>(FLOAT, {4}, {2.7f, -2.7f, 1e10f, -0.5f});
  graph.setTileMapping(toIntSrc, 0);
  readBack("toInt", popops::cast(graph, toIntSrc, INT, prog));
  readBack("toBool", popops::cast(graph, toIntSrc, BOOL, prog));
  Tensor filled = graph.addVariable(INT, {3}, "filled");
  graph.setTileMapping(filled, 1);
  popops::fill(graph, filled, prog, 42);
  readBack("filled", filled);
  Tensor filledH = graph.addVariable(HALF, {2}, "filledH");
  graph.setTileMapping(filledH, 1);
  popops::fill(graph, filledH, prog, 0.1f);
  readBack("filledH", filledH);

  // --- dynamic slices ------------------------------------------------------------------
  Tensor D = input(graph, FLOAT, {5, 3}, "D");
  Tensor off = input(graph, UNSIGNED_INT, {1}, "off");
  readBack("dyn", popops::dynamicSlice(graph, D, off, {0}, {2}, prog, "dyn"));
  Tensor off2 = graph.addConstant<unsigned>(UNSIGNED_INT, {2}, {1, 1});
  graph.setTileMapping(off2, 0);
  readBack("dyn2", popops::dynamicSlice(graph, D, off2, {0, 1}, {2, 2}, prog));
  Tensor U = input(graph, FLOAT, {5, 3}, "U");
  Tensor upd = graph.addConstant<float>(FLOAT, {1, 3}, {-1, -2, -3});
  graph.setTileMapping(upd, 0);
  popops::dynamicUpdate(graph, U, upd, off, {0}, {1}, prog);
  readBack("U", U);
  Tensor E = input(graph, FLOAT, {6, 2}, "E");
  Tensor idx = input(graph, UNSIGNED_INT, {4, 1}, "idx");
  readBack("gathered", popops::multiSlice(graph, E, idx, {0}, {1}, prog, popops::SlicePlan(), OptionFlags()));
  Tensor T = graph.addVariable(FLOAT, {4, 2}, "T");
  poputil::mapTensorLinearly(graph, T);
  popops::zero(graph, T, prog);
  Tensor S = graph.addConstant<float>(FLOAT, {3, 1, 2}, {1, 2, 3, 4, 5, 6});
  Tensor sIdx = graph.addConstant<unsigned>(UNSIGNED_INT, {3, 1}, {1, 1, 3});
  Tensor two = graph.addConstant<float>(FLOAT, {}, 2.0f);
  for (auto &t : {S, sIdx, two}) graph.setTileMapping(t, 0);
  popops::multiUpdateAdd(graph, T, S, sIdx, two, {0}, {1}, prog, popops::SlicePlan(), OptionFlags());
  readBack("T", T);
  // what PopLibs does not have is refused, not emulated: multiUpdateAdd of a tensor that is not
  // 2-D, and sums or products of unsigned integers (popops::fill<bool> does not compile)
  Tensor T3 = graph.addVariable(FLOAT, {4, 2, 1}, "T3");
  poputil::mapTensorLinearly(graph, T3);
  CHECK_THROWS(poputil::poplibs_error,
               popops::multiUpdateAdd(graph, T3, S.reshape({3, 1, 2, 1}), sIdx, two, {0}, {1}, prog, popops::SlicePlan(), OptionFlags()),
               "multiUpdateAdd: the tensor must have rank 2");
  Tensor counts = graph.addVariable(UNSIGNED_INT, {4, 2}, "counts");
  poputil::mapTensorLinearly(graph, counts);
  CHECK_THROWS(poputil::poplibs_error, popops::reduce(graph, counts, UNSIGNED_INT, {1}, popops::Operation::ADD, prog), "no ADD reduction of unsigned int");
  CHECK_THROWS(poputil::poplibs_error, popops::reduce(graph, counts, UNSIGNED_INT, {1}, popops::Operation::MUL, prog), "no MUL reduction of unsigned int");

  Engine engine(graph, prog);
  engine.load(device);
  auto A_ = randomFloats(12), B_ = randomFloats(20), GA_ = randomFloats(24), GB_ = randomFloats(16);
  std::vector<float> R_(24);
  for (unsigned i = 0; i < 24; ++i) R_[i] = float(i % 7) - 2.f;
  engine.writeTensor("A-w", A_.data(), A_.data() + A_.size());
  engine.writeTensor("B-w", B_.data(), B_.data() + B_.size());
  engine.writeTensor("GA-w", GA_.data(), GA_.data() + GA_.size());
  engine.writeTensor("GB-w", GB_.data(), GB_.data() + GB_.size());
  engine.writeTensor("R-w", R_.data(), R_.data() + R_.size());
  for (std::size_t i = 0; i < convs.size(); ++i) {
    engine.writeTensor("convIn" + std::to_string(i) + "-w", convIn[i].data(), convIn[i].data() + convIn[i].size());
    engine.writeTensor("convW" + std::to_string(i) + "-w", convW[i].data(), convW[i].data() + convW[i].size());
  }
  engine.writeTensor("castSrc-w", castValues.data(), castValues.data() + castValues.size());
  const auto KQ_ = randomFloats(3 * 50 * 70), KV_ = randomFloats(3 * 100 * 2 * 70), KA_ = randomFloats(20 * 33), KM_ = randomFloats(60 * 33);
  engine.writeTensor("KQ-w", KQ_.data(), KQ_.data() + KQ_.size());
  engine.writeTensor("KV-w", KV_.data(), KV_.data() + KV_.size());
  engine.writeTensor("KA-w", KA_.data(), KA_.data() + KA_.size());
  engine.writeTensor("KM-w", KM_.data(), KM_.data() + KM_.size());
  std::vector<float> D_(15);
  for (unsigned i = 0; i < 15; ++i) D_[i] = float(i);
  engine.writeTensor("D-w", D_.data(), D_.data() + 15);
  engine.writeTensor("U-w", D_.data(), D_.data() + 15);
  std::vector<float> E_(12);
  for (unsigned i = 0; i < 12; ++i) E_[i] = float(10 * (i / 2) + i % 2);
  engine.writeTensor("E-w", E_.data(), E_.data() + 12);
  std::vector<unsigned> idx_ = {5, 0, 2, 9};
  engine.writeTensor("idx-w", idx_.data(), idx_.data() + 4);

  auto readF = [&](const std::string &name) {
    for (auto &r : reads)
      if (r.first == name) {
        std::vector<float> v(r.second.numElements());
        if (r.second.elementType() == HALF) {
          std::vector<std::uint16_t> h(v.size());
          engine.readTensor(name, h.data(), h.data() + h.size());
          copyDeviceHalfToFloat(graph.getTarget(), h.data(), v.data(), v.size());
        } else if (r.second.elementType() == INT) {
          std::vector<int> iv(v.size());
          engine.readTensor(name, iv.data(), iv.data() + iv.size());
          for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(iv[i]);
        } else if (r.second.elementType() == BOOL) {
          std::vector<std::uint8_t> bv(v.size());
          engine.readTensor(name, bv.data(), bv.data() + bv.size());
          for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(bv[i]);
        } else {
          engine.readTensor(name, v.data(), v.data() + v.size());
        }
        return v;
      }
    return std::vector<float>();
  };

  // Run twice: everything is recomputed from the inputs (the accumulating
  // reductions are reset by zero first).
  for (int run = 0; run < 2; ++run) {
    std::vector<unsigned> off_ = {run == 0 ? 2u : 4u};
    engine.writeTensor("off-w", off_.data(), off_.data() + 1);
    engine.writeTensor("U-w", D_.data(), D_.data() + 15);
    engine.run();

    std::vector<float> ab(15), abh(15), gab(12);
    for (unsigned i = 0; i < 3; ++i)
      for (unsigned j = 0; j < 5; ++j) {
        double s = 0;
        for (unsigned p = 0; p < 4; ++p) s += double(A_[i * 4 + p]) * B_[p * 5 + j];
        ab[i * 5 + j] = float(s);
        abh[i * 5 + j] = halfRound(float(s));
      }
    for (unsigned g = 0; g < 2; ++g)
      for (unsigned i = 0; i < 3; ++i)
        for (unsigned j = 0; j < 2; ++j) {
          double s = 0;
          for (unsigned p = 0; p < 4; ++p) s += double(GA_[(g * 3 + i) * 4 + p]) * GB_[(g * 4 + p) * 2 + j];
          gab[(g * 3 + i) * 2 + j] = float(s);
        }
    CHECK(near(readF("AB"), ab, 1e-6));
    CHECK(near(readF("ABh"), abh, 1e-3));
    CHECK(near(readF("GAB"), gab, 1e-6));
    // products added in order, each with one fused multiply-add, from +0: bit for bit
    auto keyProduct = [](const std::vector<float> &a, const std::vector<float> &rows, std::size_t G, std::size_t m, std::size_t n,
                         std::size_t kk, std::size_t rowStride, std::size_t rowStart) {
      std::vector<float> c(G * m * n);
      for (std::size_t g = 0; g < G; ++g)
        for (std::size_t i = 0; i < m; ++i)
          for (std::size_t j = 0; j < n; ++j) {
            float sum = 0.0f;
            for (std::size_t p = 0; p < kk; ++p)
              sum = std::fma(a[(g * m + i) * kk + p], rows[(g * n + j) * rowStride + rowStart + p], sum);
            c[(g * m + i) * n + j] = sum;
          }
      return c;
    };
    const auto kqk = readF("KQK"), kam = readF("KAM");
    const auto wantKQK = keyProduct(KQ_, KV_, 3, 50, 100, 70, 140, 70), wantKAM = keyProduct(KA_, KM_, 1, 20, 60, 33, 33, 0);
    CHECK(kqk.size() == wantKQK.size() && std::memcmp(kqk.data(), wantKQK.data(), kqk.size() * 4) == 0);
    CHECK(kam.size() == wantKAM.size() && std::memcmp(kam.data(), wantKAM.data(), kam.size() * 4) == 0);

    // R[i][j][k] = (12i + 4j + k) % 7 - 2
    std::vector<float> sum1(8), max02(3, -1e9f), accE(4, 0), mulH(1, 1), logadd(6);
    double sqAll = 0;
    for (unsigned i = 0; i < 2; ++i)
      for (unsigned j = 0; j < 3; ++j)
        for (unsigned k = 0; k < 4; ++k) {
          const float v = R_[i * 12 + j * 4 + k];
          sum1[i * 4 + k] += v;
          max02[j] = std::max(max02[j], v);
          sqAll += double(v) * v;
          accE[k] += 2 * v;
        }
    mulH.clear();
    for (unsigned j = 0; j < 3; ++j) {
      double p = 1;
      for (unsigned k = 0; k < 4; ++k) p *= R_[j * 4 + k];
      mulH.push_back(float(p));
    }
    for (unsigned i = 0; i < 2; ++i)
      for (unsigned j = 0; j < 3; ++j)
        logadd[i * 3 + j] = float(std::log(std::exp(double(R_[i * 12 + j * 4])) + std::exp(double(R_[i * 12 + j * 4 + 1]))));
    CHECK_VEC(readF("sum1"), sum1);
    CHECK_VEC(readF("max02"), max02);
    CHECK_NEAR(readF("sqAll")[0], 0.5 * sqAll, 1e-4);
    CHECK_VEC(readF("acc"), accE);
    CHECK_VEC(readF("mulH"), mulH);
    CHECK(near(readF("logadd"), logadd, 1e-6));
    CHECK_VEC(readF("and"), (std::vector<float>{0, 1}));

    for (std::size_t i = 0; i < convs.size(); ++i) {
      std::size_t OH, OW;
      auto expect = convs[i].run(convIn[i], convW[i], OH, OW);
      auto got = readF("conv" + std::to_string(i));
      if (!near(got, expect, 1e-5)) std::cout << "conv " << i << " differs\n";
      CHECK(near(got, expect, 1e-5));
    }

    // 1.00048828125 is halfway between 1 and 1+2^-10 (to even: 1);
    // 1.00146484375 halfway between 1+2^-10 and 1+2^-9 (to even: 1+2^-9);
    // 65519 -> 65504; 65520 -> inf; 1e-8 < 2^-25 -> 0; 3e-8 > 2^-25 -> 2^-24.
    const float inf = std::numeric_limits<float>::infinity();
    CHECK_VEC(readF("backToFloat"), (std::vector<float>{1.0f, 1.0f, 1.001953125f, 65504.0f, inf, 0.0f,
                                                        5.9604644775390625e-08f, -2.5f}));
    CHECK_VEC(readF("toInt"), (std::vector<float>{2, -2, 2147483647.f, 0}));
    CHECK_VEC(readF("toBool"), (std::vector<float>{1, 1, 1, 1}));
    CHECK_VEC(readF("filled"), (std::vector<float>{42, 42, 42}));
    CHECK_VEC(readF("filledH"), (std::vector<float>{0.0999755859375f, 0.0999755859375f}));

    // D[i][j] = 3i + j. Offset 2: rows 2,3; offset 4: rows 4,0 (the slice wraps).
    if (run == 0) CHECK_VEC(readF("dyn"), (std::vector<float>{6, 7, 8, 9, 10, 11}));
    else CHECK_VEC(readF("dyn"), (std::vector<float>{12, 13, 14, 0, 1, 2}));
    CHECK_VEC(readF("dyn2"), (std::vector<float>{4, 5, 7, 8}));
    auto expectU = D_;
    const unsigned row = run == 0 ? 2 : 4;
    for (unsigned j = 0; j < 3; ++j) expectU[row * 3 + j] = -float(j + 1);
    CHECK_VEC(readF("U"), expectU);
    // E[r] = {10r, 10r+1}; offsets 5, 0, 2 and 9 (out of range: zero).
    CHECK_VEC(readF("gathered"), (std::vector<float>{50, 51, 0, 1, 20, 21, 0, 0}));
    // T[1] += 2*({1,2}+{3,4}); T[3] += 2*{5,6}
    CHECK_VEC(readF("T"), (std::vector<float>{0, 0, 8, 12, 0, 0, 10, 12}));
  }

  // Host half conversions, bit for bit.
  std::vector<float> hf = {1.0f, 65504.0f, 5.9604644775390625e-08f, -0.0f, std::nanf(""), 0.1f};
  std::vector<std::uint16_t> hh(hf.size());
  copyFloatToDeviceHalf(graph.getTarget(), hf.data(), hh.data(), hf.size());
  CHECK_VEC(hh, (std::vector<std::uint16_t>{0x3c00, 0x7bff, 0x0001, 0x8000, 0x7e00, 0x2e66}));
  return check::finish("poplibs");
}
