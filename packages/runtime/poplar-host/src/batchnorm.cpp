// popnn::bn: batch normalisation of activations [N][C][...field...], one step on the host per
// call and replica. Channel c of image n is the run of F field elements from (n * C + c) * F,
// so every pass walks the activations in order. Per-channel sums accumulate in double (the
// reference interpreter computes in float64) and round once to their type; element-wise results
// are computed in float from the float per-channel values, each formula in the order written.
// A step reads each operand at most twice and writes each result once, in place when it can.
#include "gemm.hpp" // ScratchLease
#include "internal.hpp"

#include <popnn/BatchNorm.hpp>
#include <poputil/exceptions.hpp>

#include <cmath>
#include <vector>

// no fused multiply-adds, so the element-wise results are the same in every build; the dynamic
// cost model lets -O2 vectorise loops of run-time length (with an overlap check of the pointers)
#pragma GCC optimize("fp-contract=off", "vect-cost-model=dynamic")

using poplar_host::message;
using poplar_host::ReplicaContext;
using poplar_host::shapeString;

namespace popnn {
namespace bn {

namespace {

std::string nameOf(const poplar::DebugContext &dc, const char *op) {
  return dc.getPathName().empty() ? std::string(op) : dc.getPathName() + "/" + op;
}

bool isFloatType(const poplar::Type &t) { return t == poplar::FLOAT || t == poplar::HALF; }

/// Activations [N][C][F...] seen as [N][C][F].
struct Layout {
  std::size_t N = 0, C = 0, F = 1;
  std::size_t size() const { return N * C * F; }
  std::size_t perChannel() const { return N * F; }
};

Layout layoutOf(const poplar::Tensor &acts, const char *op, const char *what) {
  if (acts.rank() < 2)
    throw poputil::poplibs_error(message(op, ": ", what, " must have rank 2 or more ([N][C][...field...]), got shape ",
                                         acts.shapeToString()));
  if (!isFloatType(acts.elementType()))
    throw poputil::poplibs_error(message(op, ": ", what, " must be float or half, got ", acts.elementType()));
  const auto shape = acts.shape();
  Layout l;
  l.N = shape[0], l.C = shape[1];
  for (std::size_t d = 2; d < shape.size(); ++d) l.F *= shape[d];
  return l;
}

/// A per-channel vector: [C], float or half.
void checkChannels(const poplar::Tensor &v, const Layout &l, const char *op, const char *what) {
  if (v.shape() != std::vector<std::size_t>{l.C})
    throw poputil::poplibs_error(message(op, ": ", what, " shape ", v.shapeToString(), " should be [", l.C,
                                         "], one value per channel"));
  if (!isFloatType(v.elementType()))
    throw poputil::poplibs_error(message(op, ": ", what, " must be float or half, got ", v.elementType()));
}

/// gradsIn goes with the activations element for element.
void checkLike(const poplar::Tensor &grads, const poplar::Tensor &acts, const char *op, const char *what) {
  if (grads.shape() != acts.shape())
    throw poputil::poplibs_error(message(op, ": gradsIn shape ", grads.shapeToString(), " should be the shape of ",
                                         what, ", ", acts.shapeToString()));
  if (grads.elementType() != acts.elementType())
    throw poputil::poplibs_error(message(op, ": gradsIn must have the type of ", what, " (", acts.elementType(),
                                         "), got ", grads.elementType()));
}

void checkPartials(const poplar::Type &t, const char *op) {
  if (!isFloatType(t)) throw poputil::poplibs_error(message(op, ": partialsType must be float or half, got ", t));
}

std::vector<float> channelFloats(const ReplicaContext &ctx, const poplar::Tensor &t) {
  std::vector<float> v(t.numElements());
  ctx.readFloats(t, v.data());
  return v;
}

/// acc[k * C + c] = the sum over n and f of the K terms term(i, c, v) stores in v for element
/// i = (n * C + c) * F + f, added in that order within a run on four chains.
template <int K, class Term> std::vector<double> channelSums(const Layout &l, const Term &term) {
  std::vector<double> acc(K * l.C, 0.0);
  double v[4][K];
  if (l.F == 1) { // a channel is one element a row: no run to sum
    for (std::size_t n = 0; n < l.N; ++n)
      for (std::size_t c = 0; c < l.C; ++c) {
        term(n * l.C + c, c, v[0]);
        for (int k = 0; k < K; ++k) acc[k * l.C + c] += v[0][k];
      }
    return acc;
  }
  for (std::size_t n = 0; n < l.N; ++n)
    for (std::size_t c = 0; c < l.C; ++c) {
      const std::size_t b = (n * l.C + c) * l.F;
      double s[4][K] = {};
      std::size_t f = 0;
      for (; f + 4 <= l.F; f += 4)
        for (int j = 0; j < 4; ++j) {
          term(b + f + j, c, v[j]);
          for (int k = 0; k < K; ++k) s[j][k] += v[j][k];
        }
      for (; f < l.F; ++f) {
        term(b + f, c, v[0]);
        for (int k = 0; k < K; ++k) s[0][k] += v[0][k];
      }
      for (int k = 0; k < K; ++k) acc[k * l.C + c] += (s[0][k] + s[1][k]) + (s[2][k] + s[3][k]);
    }
  return acc;
}

/// op(i, c) for every element i of channel c: runs of F, or rows of C when F is 1.
template <class Op> void forEachElement(const Layout &l, const Op &op) {
  if (l.F == 1) {
    for (std::size_t n = 0; n < l.N; ++n)
      for (std::size_t c = 0; c < l.C; ++c) op(n * l.C + c, c);
    return;
  }
  for (std::size_t n = 0; n < l.N; ++n)
    for (std::size_t c = 0; c < l.C; ++c) {
      const std::size_t b = (n * l.C + c) * l.F;
      for (std::size_t f = 0; f < l.F; ++f) op(b + f, c);
    }
}

/// Where a step computes an element-wise result: the new variable itself when it is one float
/// run (no operand shares its bytes), else scratch buffer `buffer`, stored by finish().
class Output {
public:
  Output(const ReplicaContext &ctx, const poplar::Tensor &t, poplar_host::ScratchLease &scratch, int buffer)
      : ctx_(ctx), t_(t), direct_(ctx.contiguousFloats(t)) {
    data_ = direct_ ? direct_ : scratch.get(buffer, t.numElements());
  }
  float *data() const { return data_; }
  void finish() const {
    if (!direct_) ctx_.writeFloats(t_, data_);
  }

private:
  const ReplicaContext &ctx_;
  poplar::Tensor t_;
  float *direct_;
  float *data_;
};

/// The inputs of the gradient steps: activations (raw, or already whitened) and gradsIn.
struct GradInputs {
  poplar::Tensor acts, gradsIn, mean, invStdDev; ///< mean invalid: acts are whitened
};

/// Per channel: sum of gradsIn * whitened, then sum of gradsIn (one pass over both).
std::vector<double> gradSums(const ReplicaContext &ctx, const GradInputs &in, const Layout &l, const float *x,
                             const float *g) {
  if (!in.mean.valid())
    return channelSums<2>(l, [&](std::size_t i, std::size_t, double *v) {
      v[0] = double(g[i]) * double(x[i]);
      v[1] = g[i];
    });
  const auto m = channelFloats(ctx, in.mean), k = channelFloats(ctx, in.invStdDev);
  return channelSums<2>(l, [&](std::size_t i, std::size_t c, double *v) {
    const float w = (x[i] - m[c]) * k[c];
    v[0] = double(g[i]) * double(w);
    v[1] = g[i];
  });
}

std::pair<poplar::Tensor, poplar::Tensor> paramGradients(poplar::Graph &graph, const GradInputs &in,
                                                         poplar::program::Sequence &prog, const Layout &l,
                                                         const poplar::DebugContext &dc) {
  auto gammaDelta = poplar_host::newMappedVariable(graph, in.gradsIn.elementType(), {l.C}, nameOf(dc, "gammaDelta"));
  auto betaDelta = poplar_host::newMappedVariable(graph, in.gradsIn.elementType(), {l.C}, nameOf(dc, "betaDelta"));
  const std::size_t C = l.C;
  poplar_host::addHostStep(prog, nameOf(dc, "batchNormParamGradients"), [=](ReplicaContext &ctx) {
    poplar_host::ScratchLease scratch;
    const float *x = ctx.floatsOf(in.acts, scratch.get(0, l.size()));
    const float *g = ctx.floatsOf(in.gradsIn, scratch.get(1, l.size()));
    const auto sums = gradSums(ctx, in, l, x, g);
    ctx.write(gammaDelta, std::vector<double>(sums.begin(), sums.begin() + C));
    ctx.write(betaDelta, std::vector<double>(sums.begin() + C, sums.end()));
  }, {in.acts, in.gradsIn, in.mean, in.invStdDev, gammaDelta, betaDelta});
  return {gammaDelta, betaDelta};
}

poplar::Tensor gradients(poplar::Graph &graph, const GradInputs &in, const poplar::Tensor &gamma,
                         poplar::program::Sequence &prog, const Layout &l, const poplar::DebugContext &dc) {
  auto out = poplar_host::newMappedVariable(graph, in.acts.elementType(), in.acts.shape(), nameOf(dc, "gradsOut"));
  poplar_host::addHostStep(prog, nameOf(dc, "batchNormGradients"), [=](ReplicaContext &ctx) {
    poplar_host::ScratchLease scratch;
    const float *x = ctx.floatsOf(in.acts, scratch.get(0, l.size()));
    const float *g = ctx.floatsOf(in.gradsIn, scratch.get(1, l.size()));
    const auto sums = gradSums(ctx, in, l, x, g); // the first pass; the output is the second
    const std::size_t C = l.C;
    const auto gam = channelFloats(ctx, gamma), k = channelFloats(ctx, in.invStdDev);
    // per channel: gamma * invStdDev, mean(gradsIn * whitened), mean(gradsIn)
    std::vector<float> scale(C), meanGW(C), meanG(C);
    const double count = double(l.perChannel());
    for (std::size_t c = 0; c < C; ++c) {
      scale[c] = gam[c] * k[c];
      meanGW[c] = float(sums[c] / count);
      meanG[c] = float(sums[C + c] / count);
    }
    Output o(ctx, out, scratch, 2);
    float *y = o.data();
    if (!in.mean.valid()) {
      forEachElement(l, [&](std::size_t i, std::size_t c) { y[i] = scale[c] * ((g[i] - meanG[c]) - x[i] * meanGW[c]); });
    } else {
      const auto m = channelFloats(ctx, in.mean);
      forEachElement(l, [&](std::size_t i, std::size_t c) {
        const float w = (x[i] - m[c]) * k[c];
        y[i] = scale[c] * ((g[i] - meanG[c]) - w * meanGW[c]);
      });
    }
    o.finish();
  }, {in.acts, in.gradsIn, in.mean, in.invStdDev, gamma, out});
  return out;
}

void paramUpdate(const poplar::Tensor &gammaDelta, const poplar::Tensor &betaDelta, float scale,
                 const poplar::Tensor &scaleTensor, const poplar::Tensor &gamma, const poplar::Tensor &beta,
                 poplar::program::Sequence &prog, const poplar::DebugContext &dc) {
  const char *op = "batchNormParamUpdate";
  if (gamma.rank() != 1)
    throw poputil::poplibs_error(message(op, ": gamma must be a vector [C], got shape ", gamma.shapeToString()));
  Layout l;
  l.C = gamma.dim(0);
  checkChannels(gamma, l, op, "gamma");
  checkChannels(beta, l, op, "beta");
  checkChannels(gammaDelta, l, op, "gammaDelta");
  checkChannels(betaDelta, l, op, "betaDelta");
  if (scaleTensor.valid() && (scaleTensor.numElements() != 1 || !isFloatType(scaleTensor.elementType())))
    throw poputil::poplibs_error(message(op, ": scale must be one float or half element, got ",
                                         scaleTensor.elementType(), " ", scaleTensor.shapeToString()));
  // in double, rounded once to the parameter's type
  poplar_host::addHostStep(prog, nameOf(dc, op), [=](ReplicaContext &ctx) {
    const double s = scaleTensor.valid() ? ctx.read(scaleTensor)[0] : double(scale);
    const auto gd = ctx.read(gammaDelta), bd = ctx.read(betaDelta);
    auto g = ctx.read(gamma), b = ctx.read(beta);
    for (std::size_t c = 0; c < g.size(); ++c) {
      g[c] += gd[c] * s;
      b[c] += bd[c] * s;
    }
    ctx.write(gamma, g);
    ctx.write(beta, b);
  }, {gammaDelta, betaDelta, scaleTensor, gamma, beta});
}

} // namespace

std::pair<poplar::Tensor, poplar::Tensor> batchNormStatistics(poplar::Graph &graph, const poplar::Tensor acts, float eps,
                                                              poplar::program::Sequence &prog, bool unbiasedVarEstimate,
                                                              bool, const poplar::Type &partialsType,
                                                              const poplar::DebugContext &debugContext,
                                                              const poplar::OptionFlags &) {
  const char *op = "batchNormStatistics";
  const Layout l = layoutOf(acts, op, "acts");
  checkPartials(partialsType, op);
  const std::size_t count = l.perChannel();
  if (count == 0)
    throw poputil::poplibs_error(message(op, ": acts ", acts.shapeToString(), " have no elements per channel"));
  if (unbiasedVarEstimate && count <= 1)
    throw poputil::poplibs_error(message(op, ": an unbiased variance needs more than one element per channel, acts ",
                                         acts.shapeToString(), " have ", count));
  auto mean = poplar_host::newMappedVariable(graph, acts.elementType(), {l.C}, nameOf(debugContext, "mean"));
  auto invStdDev = poplar_host::newMappedVariable(graph, acts.elementType(), {l.C}, nameOf(debugContext, "invStdDev"));
  // The variance is always summed about the mean, in a second pass: the accuracy PopLibs' stable
  // algorithm aims at, whichever stableAlgo asks for.
  poplar_host::addHostStep(prog, nameOf(debugContext, op), [=](ReplicaContext &ctx) {
    poplar_host::ScratchLease scratch;
    const float *x = ctx.floatsOf(acts, scratch.get(0, l.size()));
    auto mu = channelSums<1>(l, [&](std::size_t i, std::size_t, double *v) { v[0] = x[i]; });
    for (auto &m : mu) m /= double(count);
    auto var = channelSums<1>(l, [&](std::size_t i, std::size_t c, double *v) {
      const double d = double(x[i]) - mu[c];
      v[0] = d * d;
    });
    const double divisor = double(unbiasedVarEstimate ? count - 1 : count);
    for (auto &s : var) s = 1.0 / std::sqrt(s / divisor + double(eps));
    ctx.write(mean, mu);
    ctx.write(invStdDev, var);
  }, {acts, mean, invStdDev});
  return {mean, invStdDev};
}

poplar::Tensor batchNormWhiten(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &mean,
                               const poplar::Tensor &invStdDev, poplar::program::Sequence &prog,
                               const poplar::DebugContext &debugContext, const poplar::OptionFlags &) {
  const char *op = "batchNormWhiten";
  const Layout l = layoutOf(acts, op, "acts");
  checkChannels(mean, l, op, "mean");
  checkChannels(invStdDev, l, op, "invStdDev");
  auto out = poplar_host::newMappedVariable(graph, acts.elementType(), acts.shape(), nameOf(debugContext, "whitened"));
  poplar_host::addHostStep(prog, nameOf(debugContext, op), [=](ReplicaContext &ctx) {
    poplar_host::ScratchLease scratch;
    const float *x = ctx.floatsOf(acts, scratch.get(0, l.size()));
    const auto m = channelFloats(ctx, mean), k = channelFloats(ctx, invStdDev);
    Output o(ctx, out, scratch, 1);
    float *y = o.data();
    forEachElement(l, [&](std::size_t i, std::size_t c) { y[i] = (x[i] - m[c]) * k[c]; });
    o.finish();
  }, {acts, mean, invStdDev, out});
  return out;
}

std::pair<poplar::Tensor, poplar::Tensor> batchNormalise(poplar::Graph &graph, const poplar::Tensor &acts,
                                                         const poplar::Tensor &gamma, const poplar::Tensor &beta,
                                                         const poplar::Tensor &mean, const poplar::Tensor &invStdDev,
                                                         poplar::program::Sequence &prog,
                                                         const poplar::DebugContext &debugContext,
                                                         const poplar::OptionFlags &) {
  const char *op = "batchNormalise";
  const Layout l = layoutOf(acts, op, "acts");
  checkChannels(gamma, l, op, "gamma");
  checkChannels(beta, l, op, "beta");
  checkChannels(mean, l, op, "mean");
  checkChannels(invStdDev, l, op, "invStdDev");
  auto whitened = poplar_host::newMappedVariable(graph, acts.elementType(), acts.shape(), nameOf(debugContext, "whitened"));
  auto out = poplar_host::newMappedVariable(graph, acts.elementType(), acts.shape(), nameOf(debugContext, "normalised"));
  poplar_host::addHostStep(prog, nameOf(debugContext, op), [=](ReplicaContext &ctx) {
    poplar_host::ScratchLease scratch;
    const float *x = ctx.floatsOf(acts, scratch.get(0, l.size()));
    const auto m = channelFloats(ctx, mean), k = channelFloats(ctx, invStdDev);
    const auto g = channelFloats(ctx, gamma), b = channelFloats(ctx, beta);
    Output w(ctx, whitened, scratch, 1), o(ctx, out, scratch, 2);
    float *wy = w.data(), *y = o.data();
    forEachElement(l, [&](std::size_t i, std::size_t c) {
      const float v = (x[i] - m[c]) * k[c];
      wy[i] = v;
      y[i] = v * g[c] + b[c];
    });
    w.finish();
    o.finish();
  }, {acts, gamma, beta, mean, invStdDev, whitened, out});
  return {out, whitened};
}

poplar::Tensor batchNormalise(poplar::Graph &graph, const poplar::Tensor &acts,
                              const poplar::Tensor &combinedMultiplicand, const poplar::Tensor &addend,
                              poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                              const poplar::OptionFlags &) {
  const char *op = "batchNormalise";
  const Layout l = layoutOf(acts, op, "acts");
  checkChannels(combinedMultiplicand, l, op, "combinedMultiplicand");
  checkChannels(addend, l, op, "addend");
  auto out = poplar_host::newMappedVariable(graph, acts.elementType(), acts.shape(), nameOf(debugContext, "normalised"));
  poplar_host::addHostStep(prog, nameOf(debugContext, op), [=](ReplicaContext &ctx) {
    poplar_host::ScratchLease scratch;
    const float *x = ctx.floatsOf(acts, scratch.get(0, l.size()));
    const auto k = channelFloats(ctx, combinedMultiplicand), b = channelFloats(ctx, addend);
    Output o(ctx, out, scratch, 1);
    float *y = o.data();
    forEachElement(l, [&](std::size_t i, std::size_t c) { y[i] = x[i] * k[c] + b[c]; });
    o.finish();
  }, {acts, combinedMultiplicand, addend, out});
  return out;
}

std::pair<poplar::Tensor, poplar::Tensor> batchNormParamGradients(poplar::Graph &graph, const poplar::Tensor &acts,
                                                                  const poplar::Tensor &gradsIn,
                                                                  const poplar::Tensor &mean,
                                                                  const poplar::Tensor &iStdDev,
                                                                  poplar::program::Sequence &prog,
                                                                  const poplar::Type &partialsType,
                                                                  const poplar::DebugContext &debugContext,
                                                                  const poplar::OptionFlags &) {
  const char *op = "batchNormParamGradients";
  const Layout l = layoutOf(acts, op, "acts");
  checkLike(gradsIn, acts, op, "acts");
  checkChannels(mean, l, op, "mean");
  checkChannels(iStdDev, l, op, "iStdDev");
  checkPartials(partialsType, op);
  return paramGradients(graph, {acts, gradsIn, mean, iStdDev}, prog, l, debugContext);
}

std::pair<poplar::Tensor, poplar::Tensor> batchNormParamGradients(poplar::Graph &graph,
                                                                  const poplar::Tensor &actsWhitened,
                                                                  const poplar::Tensor &gradsIn,
                                                                  poplar::program::Sequence &prog,
                                                                  const poplar::Type &partialsType,
                                                                  const poplar::DebugContext &debugContext,
                                                                  const poplar::OptionFlags &) {
  const char *op = "batchNormParamGradients";
  const Layout l = layoutOf(actsWhitened, op, "actsWhitened");
  checkLike(gradsIn, actsWhitened, op, "actsWhitened");
  checkPartials(partialsType, op);
  return paramGradients(graph, {actsWhitened, gradsIn, {}, {}}, prog, l, debugContext);
}

poplar::Tensor batchNormGradients(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::Tensor &gradsIn,
                                  const poplar::Tensor &mean, const poplar::Tensor &invStdDev,
                                  const poplar::Tensor &gamma, poplar::program::Sequence &prog,
                                  const poplar::Type &partialsType, const poplar::DebugContext &debugContext,
                                  const poplar::OptionFlags &) {
  const char *op = "batchNormGradients";
  const Layout l = layoutOf(acts, op, "acts");
  checkLike(gradsIn, acts, op, "acts");
  checkChannels(mean, l, op, "mean");
  checkChannels(invStdDev, l, op, "invStdDev");
  checkChannels(gamma, l, op, "gamma");
  checkPartials(partialsType, op);
  return gradients(graph, {acts, gradsIn, mean, invStdDev}, gamma, prog, l, debugContext);
}

poplar::Tensor batchNormGradients(poplar::Graph &graph, const poplar::Tensor &actsWhitened,
                                  const poplar::Tensor &gradsIn, const poplar::Tensor &invStdDev,
                                  const poplar::Tensor &gamma, poplar::program::Sequence &prog,
                                  const poplar::Type &partialsType, const poplar::DebugContext &debugContext,
                                  const poplar::OptionFlags &) {
  const char *op = "batchNormGradients";
  const Layout l = layoutOf(actsWhitened, op, "actsWhitened");
  checkLike(gradsIn, actsWhitened, op, "actsWhitened");
  checkChannels(invStdDev, l, op, "invStdDev");
  checkChannels(gamma, l, op, "gamma");
  checkPartials(partialsType, op);
  return gradients(graph, {actsWhitened, gradsIn, {}, invStdDev}, gamma, prog, l, debugContext);
}

void batchNormParamUpdate(poplar::Graph &, const poplar::Tensor &gammaDelta, const poplar::Tensor &betaDelta,
                          float scale, poplar::Tensor &gamma, poplar::Tensor &beta, poplar::program::Sequence &prog,
                          const poplar::DebugContext &debugContext, const poplar::OptionFlags &) {
  paramUpdate(gammaDelta, betaDelta, scale, poplar::Tensor(), gamma, beta, prog, debugContext);
}

void batchNormParamUpdate(poplar::Graph &, const poplar::Tensor &gammaDelta, const poplar::Tensor &betaDelta,
                          const poplar::Tensor &scale, poplar::Tensor &gamma, poplar::Tensor &beta,
                          poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                          const poplar::OptionFlags &) {
  paramUpdate(gammaDelta, betaDelta, 0.0f, scale, gamma, beta, prog, debugContext);
}

} // namespace bn
} // namespace popnn
