// popnn::bn against plain double loops of the batch-norm formulas, on random data of several
// layouts ([N][C], [N][C][H][W], one image with a field, odd sizes, a field longer than a run of
// four): statistics (biased and unbiased variance), whitening, both forms of batchNormalise and
// the order of its pair, parameter gradients and activation gradients from raw and from whitened
// activations (which agree bit for bit), gradients summing to zero per channel when the
// statistics are the activations' own, both parameter updates, half activations, and every bad
// argument refused with poplibs_error.
#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <popnn/BatchNorm.hpp>
#include <popnn/codelets.hpp>
#include <popops/Cast.hpp>
#include <popops/codelets.hpp>
#include <poputil/exceptions.hpp>

#include "bit_cases.hpp"
#include "check.hpp"

#include <cmath>
#include <cstring>
#include <functional>
#include <iostream>
#include <random>

using namespace poplar;
using namespace poplar::program;
namespace bn = popnn::bn;

namespace {

std::mt19937 rng(11);

std::vector<float> uniform(std::size_t n, float lo, float hi) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(n);
  for (auto &x : v) x = d(rng);
  return v;
}

/// Activations [N][C][F...] as [N][C][F], with the double reference formulas.
struct Shape {
  std::vector<std::size_t> dims;
  std::size_t N() const { return dims[0]; }
  std::size_t C() const { return dims[1]; }
  std::size_t F() const {
    std::size_t f = 1;
    for (std::size_t d = 2; d < dims.size(); ++d) f *= dims[d];
    return f;
  }
  std::size_t size() const { return N() * C() * F(); }
  std::size_t channelOf(std::size_t i) const { return i / F() % C(); }

  /// Per channel: the sum over n and f of term(i).
  std::vector<double> sums(const std::function<double(std::size_t)> &term) const {
    std::vector<double> s(C(), 0.0);
    for (std::size_t i = 0; i < size(); ++i) s[channelOf(i)] += term(i);
    return s;
  }
  std::vector<double> mean(const std::vector<float> &x) const {
    auto s = sums([&](std::size_t i) { return x[i]; });
    for (auto &v : s) v /= double(N() * F());
    return s;
  }
  std::vector<double> invStdDev(const std::vector<float> &x, float eps, bool unbiased) const {
    const auto m = mean(x);
    auto s = sums([&](std::size_t i) {
      const double d = x[i] - m[channelOf(i)];
      return d * d;
    });
    for (auto &v : s) v = 1.0 / std::sqrt(v / double(N() * F() - (unbiased ? 1 : 0)) + eps);
    return s;
  }
  std::vector<double> whiten(const std::vector<float> &x, const std::vector<float> &m, const std::vector<float> &k) const {
    std::vector<double> w(size());
    for (std::size_t i = 0; i < size(); ++i) w[i] = (double(x[i]) - m[channelOf(i)]) * k[channelOf(i)];
    return w;
  }
  /// gamma * invStdDev * (g - mean(g) - w * mean(g * w)).
  std::vector<double> gradients(const std::vector<double> &w, const std::vector<float> &g, const std::vector<float> &k,
                                const std::vector<float> &gamma) const {
    const double count = double(N() * F());
    const auto sg = sums([&](std::size_t i) { return g[i]; });
    const auto sgw = sums([&](std::size_t i) { return g[i] * w[i]; });
    std::vector<double> out(size());
    for (std::size_t i = 0; i < size(); ++i) {
      const std::size_t c = channelOf(i);
      out[i] = double(gamma[c]) * k[c] * (g[i] - sg[c] / count - w[i] * (sgw[c] / count));
    }
    return out;
  }
};

/// Operands written before one run; results read after it and compared with references.
class Harness {
public:
  explicit Harness(Graph &graph) : graph_(graph) {}
  Sequence prog;

  Tensor operand(const std::string &name, std::vector<std::size_t> shape, const std::vector<float> &values,
                 const Type &type = FLOAT) {
    Tensor t = bitcases::input(graph_, type, shape, name);
    writes_.push_back([name, values, type](Engine &e) {
      if (type == FLOAT) return e.writeTensor(name + "-w", values.data(), values.data() + values.size());
      std::vector<std::uint16_t> h(values.size());
      copyFloatToDeviceHalf(Target::createIPUTarget(1, "ipu2"), values.data(), h.data(), h.size());
      e.writeTensor(name + "-w", h.data(), h.data() + h.size());
    });
    return t;
  }

  /// t (float, or half read through a cast) is read into *dst after the run.
  void read(const std::string &name, const Tensor &t, std::vector<float> *dst) {
    Tensor f = t.elementType() == FLOAT ? t : popops::cast(graph_, t, FLOAT, prog, name + "/wide");
    graph_.createHostRead(name, f);
    reads_.push_back({name, dst, t.numElements()});
  }

  /// Each element of t within tol * max(1, |want|) of want.
  void expect(const std::string &name, const Tensor &t, std::vector<double> want, double tol) {
    auto got = std::make_shared<std::vector<float>>();
    read(name, t, got.get());
    checks_.push_back([name, got, want = std::move(want), tol] {
      bool ok = got->size() == want.size();
      for (std::size_t i = 0; ok && i < want.size(); ++i) {
        if (std::fabs((*got)[i] - want[i]) <= tol * std::max(1.0, std::fabs(want[i]))) continue;
        std::cout.precision(9);
        std::cout << name << ": element " << i << " is " << (*got)[i] << ", expected " << want[i] << "\n";
        ok = false;
      }
      CHECK(ok);
    });
    keep_.push_back(got);
  }

  /// Two results with the same bits.
  void same(const std::string &name, const Tensor &a, const Tensor &b) {
    auto x = std::make_shared<std::vector<float>>(), y = std::make_shared<std::vector<float>>();
    read(name + "/a", a, x.get());
    read(name + "/b", b, y.get());
    checks_.push_back([name, x, y] {
      const bool ok = bitcases::sameBits(*x, *y);
      if (!ok) std::cout << name << ": the two results differ\n";
      CHECK(ok);
    });
    keep_.push_back(x), keep_.push_back(y);
  }

  void after(std::function<void()> check) { checks_.push_back(std::move(check)); }

  void run(Device &device) {
    Engine engine(graph_, prog);
    engine.load(device);
    for (auto &w : writes_) w(engine);
    engine.run(0);
    for (auto &r : reads_) {
      r.dst->resize(r.n);
      engine.readTensor(r.name, r.dst->data(), r.dst->data() + r.n);
    }
    for (auto &c : checks_) c();
  }

private:
  struct Read {
    std::string name;
    std::vector<float> *dst;
    std::size_t n;
  };
  Graph &graph_;
  std::vector<std::function<void(Engine &)>> writes_;
  std::vector<Read> reads_;
  std::vector<std::function<void()>> checks_;
  std::vector<std::shared_ptr<std::vector<float>>> keep_;
};

constexpr double kTol = 1e-5;

} // namespace

int main() {
  Device device = bitcases::attachedIpu();
  Graph graph(device.getTarget());
  popops::addCodelets(graph);
  popnn::addCodelets(graph);
  Harness h(graph);
  Sequence &prog = h.prog;

  const std::vector<Shape> shapes = {
      {{4, 3}},         // rank 2: one element per image and channel
      {{33, 65}},       // rank 2, odd sizes
      {{2, 5, 3, 4}},   // rank 4
      {{1, 3, 7}},      // one image, a field
      {{3, 7, 5, 3}},   // odd sizes
      {{5, 4, 9, 9}},   // fields of 81: four chains and a tail
      {{2, 3, 2, 2, 3}} // rank 5
  };
  for (std::size_t s = 0; s < shapes.size(); ++s) {
    const Shape &sh = shapes[s];
    const std::string id = "bn" + std::to_string(s);
    const std::size_t C = sh.C();
    // per-channel offsets, so that the means are far from zero
    const auto offsets = uniform(C, -3.f, 3.f);
    auto x = uniform(sh.size(), -2.f, 2.f);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += offsets[sh.channelOf(i)];
    const auto g = uniform(sh.size(), -1.f, 1.f);
    const auto m = uniform(C, -3.f, 3.f), k = uniform(C, 0.2f, 2.f);
    const auto gamma = uniform(C, -1.5f, 1.5f), beta = uniform(C, -1.f, 1.f);
    const float eps = 1e-3f;

    Tensor acts = h.operand(id + "x", sh.dims, x), grads = h.operand(id + "g", sh.dims, g);
    Tensor mean = h.operand(id + "m", {C}, m), inv = h.operand(id + "k", {C}, k);
    Tensor tg = h.operand(id + "gamma", {C}, gamma), tb = h.operand(id + "beta", {C}, beta);

    for (bool unbiased : {false, true}) {
      if (unbiased && sh.N() * sh.F() < 2) continue;
      const std::string sid = id + (unbiased ? "u" : "b");
      auto [mu, is] = bn::batchNormStatistics(graph, acts, eps, prog, unbiased, s % 2 == 0, FLOAT, sid);
      CHECK_VEC(mu.shape(), std::vector<std::size_t>{C});
      CHECK_VEC(is.shape(), std::vector<std::size_t>{C});
      CHECK(mu.elementType() == FLOAT && is.elementType() == FLOAT);
      h.expect(sid + "/mean", mu, sh.mean(x), kTol);
      h.expect(sid + "/invStdDev", is, sh.invStdDev(x, eps, unbiased), kTol);
    }

    const auto w = sh.whiten(x, m, k);
    Tensor whitened = bn::batchNormWhiten(graph, acts, mean, inv, prog, id + "w");
    CHECK_VEC(whitened.shape(), sh.dims);
    h.expect(id + "/whiten", whitened, w, kTol);

    auto [normalised, whitened2] = bn::batchNormalise(graph, acts, tg, tb, mean, inv, prog, id + "n");
    std::vector<double> norm(sh.size());
    for (std::size_t i = 0; i < norm.size(); ++i) norm[i] = w[i] * gamma[sh.channelOf(i)] + beta[sh.channelOf(i)];
    h.expect(id + "/normalised", normalised, norm, kTol);
    h.expect(id + "/normalise/whitened", whitened2, w, kTol);
    h.same(id + "/whitenedAlike", whitened, whitened2);

    Tensor inferred = bn::batchNormalise(graph, acts, tg, tb, prog, id + "i"); // gamma as multiplicand, beta as addend
    std::vector<double> inf(sh.size());
    for (std::size_t i = 0; i < inf.size(); ++i) inf[i] = double(x[i]) * gamma[sh.channelOf(i)] + beta[sh.channelOf(i)];
    h.expect(id + "/inference", inferred, inf, kTol);

    auto [gd, bd] = bn::batchNormParamGradients(graph, acts, grads, mean, inv, prog, FLOAT, id + "pg");
    auto [gdw, bdw] = bn::batchNormParamGradients(graph, whitened, grads, prog, FLOAT, id + "pgw");
    CHECK_VEC(gd.shape(), std::vector<std::size_t>{C});
    CHECK(gd.elementType() == FLOAT && bd.elementType() == FLOAT);
    {
      const auto wantGd = sh.sums([&](std::size_t i) { return g[i] * w[i]; });
      const auto wantBd = sh.sums([&](std::size_t i) { return g[i]; });
      const auto absGd = sh.sums([&](std::size_t i) { return std::fabs(g[i] * w[i]); });
      const auto absBd = sh.sums([&](std::size_t i) { return std::fabs(g[i]); });
      // a sum is as accurate as the sum of its terms' magnitudes allows
      auto within = [](const std::vector<double> &want, const std::vector<double> &scale) {
        return [=](const std::vector<float> &got) {
          bool ok = got.size() == want.size();
          for (std::size_t c = 0; ok && c < want.size(); ++c) ok = std::fabs(got[c] - want[c]) <= kTol * std::max(1.0, scale[c]);
          return ok;
        };
      };
      auto got = std::make_shared<std::vector<float>>(), gotB = std::make_shared<std::vector<float>>();
      h.read(id + "/gammaDelta", gd, got.get());
      h.read(id + "/betaDelta", bd, gotB.get());
      h.after([=] {
        CHECK(within(wantGd, absGd)(*got));
        CHECK(within(wantBd, absBd)(*gotB));
      });
    }
    h.same(id + "/gammaDeltaAlike", gd, gdw);
    h.same(id + "/betaDeltaAlike", bd, bdw);

    Tensor gradsOut = bn::batchNormGradients(graph, acts, grads, mean, inv, tg, prog, FLOAT, id + "gr");
    Tensor gradsOutW = bn::batchNormGradients(graph, whitened, grads, inv, tg, prog, FLOAT, id + "grw");
    CHECK_VEC(gradsOut.shape(), sh.dims);
    CHECK(gradsOut.elementType() == FLOAT);
    h.expect(id + "/gradients", gradsOut, sh.gradients(w, g, k, gamma), kTol);
    h.same(id + "/gradientsAlike", gradsOut, gradsOutW);

    { // with the activations' own statistics (and no epsilon, so that the whitened activations
      // have unit variance) the gradient has no component along 1 or the whitened activations,
      // per channel
      auto [mu, is] = bn::batchNormStatistics(graph, acts, 0.0f, prog, false, false, FLOAT, id + "own");
      Tensor ownW = bn::batchNormWhiten(graph, acts, mu, is, prog, id + "ownW");
      Tensor own = bn::batchNormGradients(graph, acts, grads, mu, is, tg, prog, FLOAT, id + "ownG");
      auto got = std::make_shared<std::vector<float>>(), gotW = std::make_shared<std::vector<float>>();
      h.read(id + "/own", own, got.get());
      h.read(id + "/ownW", ownW, gotW.get());
      h.after([=] {
        const auto sum = sh.sums([&](std::size_t i) { return (*got)[i]; });
        const auto dot = sh.sums([&](std::size_t i) { return (*got)[i] * double((*gotW)[i]); });
        const auto scale = sh.sums([&](std::size_t i) { return std::fabs((*got)[i]) * (1 + std::fabs((*gotW)[i])); });
        bool ok = true;
        for (std::size_t c = 0; c < sh.C(); ++c)
          ok = ok && std::fabs(sum[c]) <= 1e-5 * (1 + scale[c]) && std::fabs(dot[c]) <= 1e-5 * (1 + scale[c]);
        CHECK(ok);
      });
    }
  }

  { // parameter updates, a float scale and a tensor scale
    const std::size_t C = 6;
    const auto gamma = uniform(C, -1.f, 1.f), beta = uniform(C, -1.f, 1.f);
    const auto gd = uniform(C, -3.f, 3.f), bd = uniform(C, -3.f, 3.f);
    Tensor tg = h.operand("updGamma", {C}, gamma), tb = h.operand("updBeta", {C}, beta);
    Tensor tgd = h.operand("updGd", {C}, gd), tbd = h.operand("updBd", {C}, bd);
    Tensor scale = h.operand("updScale", {1}, {0.25f});
    bn::batchNormParamUpdate(graph, tgd, tbd, -0.125f, tg, tb, prog, "upd");
    bn::batchNormParamUpdate(graph, tgd, tbd, scale, tg, tb, prog, "updT");
    std::vector<double> wantG(C), wantB(C);
    for (std::size_t c = 0; c < C; ++c) {
      wantG[c] = double(float(gamma[c] + gd[c] * -0.125)) + gd[c] * 0.25;
      wantB[c] = double(float(beta[c] + bd[c] * -0.125)) + bd[c] * 0.25;
    }
    h.expect("update/gamma", tg, wantG, 1e-6);
    h.expect("update/beta", tb, wantB, 1e-6);
  }

  { // half activations: half results close to the float formulas
    const Shape sh{{3, 4, 5}};
    const auto x = uniform(sh.size(), -2.f, 2.f);
    const auto g = uniform(sh.size(), -1.f, 1.f), gamma = uniform(4, 0.5f, 1.5f), beta = uniform(4, -1.f, 1.f);
    // the values the half operands hold
    const auto target = Target::createIPUTarget(1, "ipu2");
    auto toHalf = [&](std::vector<float> v) {
      std::vector<std::uint16_t> b(v.size());
      copyFloatToDeviceHalf(target, v.data(), b.data(), b.size());
      copyDeviceHalfToFloat(target, b.data(), v.data(), b.size());
      return v;
    };
    const auto xh = toHalf(x), gh = toHalf(g), gammah = toHalf(gamma), betah = toHalf(beta);
    Tensor acts = h.operand("hx", sh.dims, xh, HALF), grads = h.operand("hg", sh.dims, gh, HALF);
    Tensor tg = h.operand("hgamma", {4}, gammah, HALF), tb = h.operand("hbeta", {4}, betah, HALF);
    auto [mu, is] = bn::batchNormStatistics(graph, acts, 1e-3f, prog, true, false, FLOAT, "hs");
    CHECK(mu.elementType() == HALF && is.elementType() == HALF);
    h.expect("half/mean", mu, sh.mean(xh), 2e-3);
    h.expect("half/invStdDev", is, sh.invStdDev(xh, 1e-3f, true), 2e-3);
    Tensor w = bn::batchNormWhiten(graph, acts, mu, is, prog, "hw");
    CHECK(w.elementType() == HALF);
    Tensor gr = bn::batchNormGradients(graph, acts, grads, mu, is, tg, prog, HALF, "hgr");
    CHECK(gr.elementType() == HALF);
    auto [gd, bd] = bn::batchNormParamGradients(graph, acts, grads, mu, is, prog, HALF, "hpg");
    CHECK(gd.elementType() == HALF);
    // the half statistics as the steps read them, and the references from those
    auto muF = std::make_shared<std::vector<float>>(), isF = std::make_shared<std::vector<float>>();
    auto wF = std::make_shared<std::vector<float>>(), grF = std::make_shared<std::vector<float>>();
    auto bdF = std::make_shared<std::vector<float>>();
    h.read("half/mu", mu, muF.get());
    h.read("half/is", is, isF.get());
    h.read("half/w", w, wF.get());
    h.read("half/gr", gr, grF.get());
    h.read("half/bd", bd, bdF.get());
    h.after([=] {
      const auto wantW = sh.whiten(xh, *muF, *isF);
      const auto wantGr = sh.gradients(wantW, gh, *isF, gammah);
      const auto wantBd = sh.sums([&](std::size_t i) { return gh[i]; });
      bool ok = true;
      for (std::size_t i = 0; i < sh.size(); ++i) {
        ok = ok && std::fabs((*wF)[i] - wantW[i]) <= 2e-3 * std::max(1.0, std::fabs(wantW[i]));
        ok = ok && std::fabs((*grF)[i] - wantGr[i]) <= 4e-3 * std::max(1.0, std::fabs(wantGr[i]));
      }
      for (std::size_t c = 0; c < 4; ++c) ok = ok && std::fabs((*bdF)[c] - wantBd[c]) <= 2e-3 * std::max(1.0, std::fabs(wantBd[c]));
      CHECK(ok);
    });
  }

  { // arguments refused as PopLibs refuses them
    using poputil::poplibs_error;
    Sequence p;
    Tensor acts = bitcases::input(graph, FLOAT, {2, 3, 4}, "badActs");
    Tensor v3 = bitcases::input(graph, FLOAT, {3}, "badV3"), v4 = bitcases::input(graph, FLOAT, {4}, "badV4");
    Tensor rank1 = bitcases::input(graph, FLOAT, {6}, "badRank1");
    Tensor ints = bitcases::input(graph, INT, {2, 3, 4}, "badInts");
    Tensor intV3 = bitcases::input(graph, INT, {3}, "badIntV3");
    Tensor other = bitcases::input(graph, FLOAT, {2, 3, 5}, "badOther");
    Tensor halfActs = bitcases::input(graph, HALF, {2, 3, 4}, "badHalf");
    Tensor one = bitcases::input(graph, FLOAT, {1, 3}, "badOne");
    CHECK_THROWS(poplibs_error, bn::batchNormStatistics(graph, rank1, 1e-3f, p, false), "rank 2 or more");
    CHECK_THROWS(poplibs_error, bn::batchNormWhiten(graph, rank1, v3, v3, p), "rank 2 or more");
    CHECK_THROWS(poplibs_error, bn::batchNormStatistics(graph, ints, 1e-3f, p, false), "acts must be float or half");
    CHECK_THROWS(poplibs_error, bn::batchNormStatistics(graph, acts, 1e-3f, p, false, false, INT), "partialsType");
    CHECK_THROWS(poplibs_error, bn::batchNormStatistics(graph, one, 1e-3f, p, true), "more than one element per channel");
    bn::batchNormStatistics(graph, one, 1e-3f, p, false); // biased: one element is enough
    CHECK_THROWS(poplibs_error, bn::batchNormWhiten(graph, acts, v4, v3, p), "mean shape [4] should be [3]");
    CHECK_THROWS(poplibs_error, bn::batchNormWhiten(graph, acts, v3, v4, p), "invStdDev shape [4] should be [3]");
    CHECK_THROWS(poplibs_error, bn::batchNormWhiten(graph, acts, intV3, v3, p), "mean must be float or half");
    CHECK_THROWS(poplibs_error, bn::batchNormalise(graph, acts, v4, v3, v3, v3, p), "gamma shape");
    CHECK_THROWS(poplibs_error, bn::batchNormalise(graph, acts, v3, v4, v3, v3, p), "beta shape");
    CHECK_THROWS(poplibs_error, bn::batchNormalise(graph, acts, v3, v4, p), "addend shape");
    CHECK_THROWS(poplibs_error, bn::batchNormalise(graph, acts, v4, v3, p), "combinedMultiplicand shape");
    CHECK_THROWS(poplibs_error, bn::batchNormParamGradients(graph, acts, other, v3, v3, p), "gradsIn shape [2,3,5]");
    CHECK_THROWS(poplibs_error, bn::batchNormParamGradients(graph, acts, other, p), "gradsIn shape");
    CHECK_THROWS(poplibs_error, bn::batchNormParamGradients(graph, acts, halfActs, p), "gradsIn must have the type");
    CHECK_THROWS(poplibs_error, bn::batchNormParamGradients(graph, acts, acts, v3, v4, p), "iStdDev shape");
    CHECK_THROWS(poplibs_error, bn::batchNormGradients(graph, acts, other, v3, v3, v3, p), "gradsIn shape");
    CHECK_THROWS(poplibs_error, bn::batchNormGradients(graph, acts, acts, v3, v3, v4, p), "gamma shape");
    CHECK_THROWS(poplibs_error, bn::batchNormGradients(graph, acts, acts, v4, v3, p), "invStdDev shape");
    CHECK_THROWS(poplibs_error, bn::batchNormGradients(graph, ints, ints, v3, v3, p), "must be float or half");
    CHECK_THROWS(poplibs_error, bn::batchNormGradients(graph, rank1, rank1, v3, v3, p), "rank 2 or more");
    CHECK_THROWS(poplibs_error, bn::batchNormGradients(graph, acts, acts, v3, v3, p, INT), "partialsType");
    Tensor g3 = bitcases::input(graph, FLOAT, {3}, "badG3"), b3 = bitcases::input(graph, FLOAT, {3}, "badB3");
    CHECK_THROWS(poplibs_error, bn::batchNormParamUpdate(graph, v4, v3, 1.0f, g3, b3, p), "gammaDelta shape");
    CHECK_THROWS(poplibs_error, bn::batchNormParamUpdate(graph, v3, v4, 1.0f, g3, b3, p), "betaDelta shape");
    CHECK_THROWS(poplibs_error, bn::batchNormParamUpdate(graph, v3, v3, 1.0f, g3, v4, p), "beta shape");
    CHECK_THROWS(poplibs_error, bn::batchNormParamUpdate(graph, v3, v3, 1.0f, acts, b3, p), "gamma must be a vector");
    CHECK_THROWS(poplibs_error, bn::batchNormParamUpdate(graph, v3, v3, v3, g3, b3, p), "scale must be one");
  }

  h.run(device);
  return check::finish("batchnorm");
}
