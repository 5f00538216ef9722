// poplin: matrix multiplication and convolution, computed on the host as the
// IPU accumulates them: in the partials type, one rounding per step (see
// PartialSums and the README), then rounded to the output type.
#include "convkernel.hpp"
#include "gemm.hpp"
#include "internal.hpp"

#include <poplin/ConvParams.hpp>
#include <poplin/Convolution.hpp>
#include <poplin/MatMul.hpp>
#include <poplin/codelets.hpp>
#include <poputil/exceptions.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

using poplar_host::message;
using poplar_host::ReplicaContext;
using poplar_host::shapeString;

void poplar_host::checkMemoryProportion(const poplar::OptionFlags &o, const char *op) {
  const auto amp = o.get("availableMemoryProportion", "");
  if (amp.empty()) return;
  char *end = nullptr;
  const double v = std::strtod(amp.c_str(), &end);
  if (end == amp.c_str() || *end != '\0' || !(v >= 0.0 && v <= 1.0))
    throw poplar::invalid_option(message(op, ": invalid value '", amp,
                                         "' for option availableMemoryProportion (expected a number in [0, 1])"));
}

namespace poplin {

void addCodelets(poplar::Graph &) {}

namespace {

std::string nameOf(const poplar::DebugContext &dc, const char *op) {
  return dc.getPathName().empty() ? std::string(op) : dc.getPathName() + "/" + op;
}

/// The options the emulation understands are checked like PopLibs does;
/// others are accepted and ignored.
void checkOptions(const poplar::OptionFlags &o, const char *op) {
  poplar_host::checkMemoryProportion(o, op);
  const auto pt = o.get("partialsType", "");
  if (!pt.empty() && pt != "float" && pt != "half" && pt != "FLOAT" && pt != "HALF")
    throw poplar::invalid_option(message(op, ": invalid value '", pt, "' for option partialsType (float or half)"));
  // a planning hint of PopLibs' matmuls: checked, no effect on the emulated results
  const auto fc = o.get("fullyConnectedPass", "");
  if (!fc.empty() && fc != "NONE" && fc != "INFERENCE_FWD" && fc != "TRAINING_FWD" && fc != "TRAINING_BWD" && fc != "TRAINING_WU")
    throw poplar::invalid_option(message(op, ": invalid value '", fc, "' for option fullyConnectedPass (NONE, INFERENCE_FWD, TRAINING_FWD, TRAINING_BWD or TRAINING_WU)"));
  // the pass a convolution (or a fully-connected layer's matmul) is planned for: checked, no
  // effect on the emulated results
  const auto pass = o.get("pass", "");
  static const char *const kPasses[] = {"NONE", "INFERENCE_FWD", "TRAINING_FWD", "TRAINING_BWD", "TRAINING_WU",
                                        "FC_INFERENCE_FWD", "FC_TRAINING_FWD", "FC_TRAINING_BWD", "FC_TRAINING_WU"};
  if (!pass.empty() && std::find(std::begin(kPasses), std::end(kPasses), pass) == std::end(kPasses))
    throw poplar::invalid_option(message(op, ": invalid value '", pass, "' for option pass (NONE, INFERENCE_FWD, TRAINING_FWD, TRAINING_BWD, TRAINING_WU, FC_INFERENCE_FWD, FC_TRAINING_FWD, FC_TRAINING_BWD or FC_TRAINING_WU)"));
}

/// Convolutions: enableConvDithering (which tile a convolution's layout starts from) is checked;
/// the emulation's results do not depend on the layout.
void checkConvOptions(const poplar::OptionFlags &o, const char *op) {
  checkOptions(o, op);
  const auto dither = o.get("enableConvDithering", "");
  if (!dither.empty() && dither != "true" && dither != "false")
    throw poplar::invalid_option(message(op, ": invalid value '", dither, "' for option enableConvDithering (true or false)"));
}

/// The type of the partial sums: the partialsType option (default float), unless it is smaller
/// than the output type (PopLibs then uses the output type).
bool halfPartials(const poplar::OptionFlags &o, const poplar::Type &outputType) {
  const auto pt = o.get("partialsType", "float");
  return (pt == "half" || pt == "HALF") && outputType == poplar::HALF;
}

using poplar_host::allFiniteF32;

/// Sums of products in the partials type: each step adds one product to the running sum and
/// rounds the result once. Float partials are float32 fused multiply-adds (a product of halves
/// is exact in float, so there it is the same as rounding the product first); half partials
/// round each sum to half under the tile's floating-point mode (stochastically with esr).
/// Operands are values of the input type held in doubles.
class PartialSums {
public:
  PartialSums(bool half, poplar_host::Rounder &r) : half_(half), r_(r) {}
  bool half() const { return half_; }
  /// Sum number k of output element e.
  double add(double acc, double a, double b, std::uint64_t e, std::uint64_t k) {
    if (half_) return r_.toHalf(acc + a * b, e, k); // the exact sum, rounded once
    return static_cast<double>(std::fma(static_cast<float>(a), static_cast<float>(b), static_cast<float>(acc)));
  }
  /// Flags for the finished sums: a NaN comes from a NaN operand or an invalid operation;
  /// in float, an infinity from finite operands is an overflow (half overflows were flagged
  /// as they happened).
  void finish(const std::vector<double> &sums, bool operandsFinite) {
    for (double v : sums) {
      if (std::isnan(v)) r_.flags |= poplar_host::kFpInvalid;
      else if (std::isinf(v) && operandsFinite && !half_) r_.flags |= poplar_host::kFpOverflow;
    }
  }
  /// The same for float sums; `operandsFinite()` is only asked when a sum is not finite. Flags
  /// matter only to a tile that traps on them (ReplicaContext::raised): on the others (the
  /// default), the sums are not scanned at all.
  template <class OperandsFinite> void finish(const float *sums, std::size_t n, OperandsFinite operandsFinite) {
    if (!(r_.mode.traps() & (poplar_host::kFpInvalid | poplar_host::kFpOverflow)) || allFiniteF32(sums, n)) return;
    const bool finite = operandsFinite();
    for (std::size_t i = 0; i < n; ++i) {
      const float v = sums[i];
      if (std::isnan(v)) r_.flags |= poplar_host::kFpInvalid;
      else if (std::isinf(v) && finite && !half_) r_.flags |= poplar_host::kFpOverflow;
    }
  }

private:
  bool half_;
  poplar_host::Rounder &r_;
};

bool allFinite(const std::vector<double> &v) {
  for (double x : v)
    if (!std::isfinite(x)) return false;
  return true;
}


/// Every region of `t` a whole number of runs of `length` elements (so each run lies in one).
bool inRunsOf(const poplar::Tensor &t, std::size_t length) {
  for (const auto &r : poplar_host::impl(t).regions)
    if (r.size() % length != 0) return false;
  return length > 0;
}

/// C[g] = A[g] x B[g] for g in groups (or, accumulating, C[g] += scale * A[g] x B[g], a scaled
/// add rounded once); A is [G,m,kk], B [G,kk,n]. For each output element the K products are
/// summed in order p = 0, 1, ..., kk - 1.
void addMatMulStep(poplar::program::Sequence &prog, const poplar::Tensor &A, const poplar::Tensor &B,
                   const poplar::Tensor &C, std::size_t G, std::size_t m, std::size_t kk, std::size_t n,
                   bool accumulate, double scale, bool halfSums, const std::string &name,
                   const std::vector<poplar::Tensor> &temporaries = {}) {
  std::vector<poplar::Tensor> touches{A, B, C};
  touches.insert(touches.end(), temporaries.begin(), temporaries.end());
  // a B whose columns lie in runs (the transpose of a matrix with contiguous rows, as attention's
  // keys are) is packed from those runs, not gathered element by element first
  // (looked for only when B's runs are short: the view of a contiguous B's columns would be one
  // region per element)
  const bool shortRuns = B.elementType() == poplar::FLOAT && poplar_host::impl(B).regions.size() * 4 > B.numElements();
  const poplar::Tensor columns = shortRuns ? B.reshape({G, kk, n}).dimShuffle({0, 2, 1}) : poplar::Tensor();
  const bool byColumns = shortRuns && inRunsOf(columns, kk) && poplar_host::impl(columns).regions.size() < poplar_host::impl(B).regions.size();
  poplar_host::addHostStep(prog, name, [=](ReplicaContext &ctx) {
    poplar_host::Rounder r = ctx.rounder(C);
    PartialSums sums(halfSums, r);
    if (!halfSums) { // float32 through the blocked kernel (same sums, same order)
      poplar_host::ScratchLease scratch;
      // operands read where they lie when they can be; a new product straight into C
      std::vector<const float *> columnRuns;
      const bool packColumns = byColumns && ctx.floatRows(columns, kk, columnRuns);
      const float *af = ctx.floatsOf(A, scratch.get(0, G * m * kk));
      const float *bf = packColumns ? nullptr : ctx.floatsOf(B, scratch.get(1, G * kk * n));
      float *direct = accumulate ? nullptr : ctx.contiguousFloats(C);
      float *c = direct ? direct : scratch.get(2, G * m * n);
      for (std::size_t g = 0; g < G; ++g) {
        if (!packColumns) {
          poplar_host::gemmF32(m, n, kk, af + g * m * kk, kk, bf + g * kk * n, n, c + g * m * n, n);
          continue;
        }
        const float *const *col = columnRuns.data() + g * n; // column j of B[g]: col[j][0..kk)
        poplar_host::gemmF32(m, n, kk, af + g * m * kk, kk,
                             [col](std::size_t p0, std::size_t kc, std::size_t j0, std::size_t nc, std::size_t nr, float *out) {
                               poplar_host::packColumnRuns(col, p0, kc, j0, nc, nr, out);
                             },
                             c + g * m * n, n);
      }
      sums.finish(c, G * m * n, [&] {
        if (!allFiniteF32(af, G * m * kk)) return false;
        if (!packColumns) return allFiniteF32(bf, G * kk * n);
        for (const float *run : columnRuns)
          if (!allFiniteF32(run, kk)) return false;
        return true;
      });
      ctx.raised(r);
      if (direct) return;
      if (!accumulate) return ctx.writeFloats(C, c);
      auto out = ctx.read(C);
      for (std::size_t e = 0; e < out.size(); ++e) out[e] += scale * c[e];
      return ctx.write(C, out);
    }
    const auto a = ctx.read(A), b = ctx.read(B);
    std::vector<double> c(G * m * n, 0.0);
    for (std::size_t g = 0; g < G; ++g)
      for (std::size_t i = 0; i < m; ++i)
        for (std::size_t p = 0; p < kk; ++p) {
          const double av = a[(g * m + i) * kk + p];
          const double *bp = &b[(g * kk + p) * n];
          for (std::size_t j = 0; j < n; ++j) {
            const std::size_t e = (g * m + i) * n + j;
            c[e] = sums.add(c[e], av, bp[j], e, p);
          }
        }
    sums.finish(c, allFinite(a) && allFinite(b));
    ctx.raised(r);
    if (accumulate) {
      const auto prev = ctx.read(C);
      for (std::size_t e = 0; e < c.size(); ++e) c[e] = prev[e] + scale * c[e];
    }
    ctx.write(C, c);
  }, touches)->flops = 2 * std::uint64_t(G) * m * kk * n;
}

void checkMatMulOperands(const char *op, const poplar::Tensor &A, const poplar::Tensor &B, unsigned rank) {
  const auto a = A.shape(), b = B.shape();
  if (a.size() != rank || b.size() != rank)
    throw poputil::poplibs_error(message(op, ": operands must be ", rank, "-D, got ", shapeString(a), " and ",
                                         shapeString(b)));
  if (a[rank - 1] != b[rank - 2] || (rank == 3 && a[0] != b[0]))
    throw poputil::poplibs_error(message(op, ": shapes ", shapeString(a), " and ", shapeString(b),
                                         " cannot be multiplied"));
  if (A.elementType() != B.elementType())
    throw poputil::poplibs_error(message(op, ": operand types differ (", A.elementType(), " and ", B.elementType(),
                                         ")"));
}

using PlannedLayout = poplar_host::VarInfo::PlannedLayout;

/// A variable made in `layout` (by createMatMulInputLHS/RHS or createWeights/createInput), or a
/// slice of one: the operation reads it where it lies.
bool isPlannedOperand(const poplar::Tensor &t, PlannedLayout layout = PlannedLayout::MatMul) {
  const auto &ti = poplar_host::impl(t);
  if (ti.regions.empty()) return false;
  const unsigned var = ti.regions[0].var;
  for (const auto &r : ti.regions)
    if (r.var != var) return false;
  return ti.graph->vars[var].plannedLayout == layout && !t.containsAliases();
}

/// Marks a variable as made in the layout `layout` plans for.
poplar::Tensor planned(const poplar::Tensor &t, PlannedLayout layout = PlannedLayout::MatMul) {
  const auto &ti = poplar_host::impl(t);
  if (!ti.regions.empty()) ti.graph->vars[ti.regions[0].var].plannedLayout = layout;
  return t;
}

/// The temporary memory a PopLibs matmul takes while it runs, as the emulation counts it: the
/// operands rearranged into the plan's layout and the partial sums (in the partials type).
/// They exist only for the liveness-based memory accounting; the product is computed exactly.
std::vector<poplar::Tensor> matMulTemporaries(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                                              std::vector<std::size_t> outShape, const poplar::Type &outputType,
                                              const poplar::OptionFlags &options, const std::string &name) {
  const poplar::Type partials = halfPartials(options, outputType) ? poplar::HALF : poplar::FLOAT;
  std::vector<poplar::Tensor> temps;
  if (!isPlannedOperand(A)) temps.push_back(poplar_host::newMappedVariable(graph, A.elementType(), A.shape(), name + "/lhsRearranged"));
  if (!isPlannedOperand(B)) temps.push_back(poplar_host::newMappedVariable(graph, B.elementType(), B.shape(), name + "/rhsRearranged"));
  temps.push_back(poplar_host::newMappedVariable(graph, partials, outShape, name + "/partials"));
  return temps;
}

} // namespace

poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::Type &outputType,
                      const poplar::DebugContext &debugContext, const poplar::OptionFlags &options, PlanningCache *) {
  checkMatMulOperands("matMul", A, B, 2);
  checkOptions(options, "matMul");
  const std::size_t m = A.dim(0), kk = A.dim(1), n = B.dim(1);
  auto C = poplar_host::newMappedVariable(graph, outputType, {m, n}, nameOf(debugContext, "matMul"));
  addMatMulStep(prog, A, B, C, 1, m, kk, n, false, 1.0, halfPartials(options, outputType),
                nameOf(debugContext, "matMul"),
                matMulTemporaries(graph, A, B, {m, n}, outputType, options, nameOf(debugContext, "matMul")));
  return C;
}

poplar::Tensor matMul(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                      poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                      const poplar::OptionFlags &options, PlanningCache *cache) {
  return matMul(graph, A, B, prog, A.elementType(), debugContext, options, cache);
}

void matMulAcc(poplar::Graph &, const poplar::Tensor &C, float k, const poplar::Tensor &A, const poplar::Tensor &B,
               poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
               const poplar::OptionFlags &options, PlanningCache *) {
  checkMatMulOperands("matMulAcc", A, B, 2);
  checkOptions(options, "matMulAcc");
  const std::size_t m = A.dim(0), kk = A.dim(1), n = B.dim(1);
  if (C.shape() != std::vector<std::size_t>{m, n})
    throw poputil::poplibs_error(message("matMulAcc: the accumulator ", C.shapeToString(), " should be ",
                                         shapeString({m, n})));
  addMatMulStep(prog, A, B, C, 1, m, kk, n, true, k, halfPartials(options, C.elementType()),
                nameOf(debugContext, "matMulAcc"));
}

poplar::Tensor matMulGrouped(poplar::Graph &graph, const poplar::Tensor &A, const poplar::Tensor &B,
                             poplar::program::Sequence &prog, const poplar::Type &outputType,
                             const poplar::DebugContext &debugContext, const poplar::OptionFlags &options,
                             PlanningCache *) {
  checkMatMulOperands("matMulGrouped", A, B, 3);
  checkOptions(options, "matMulGrouped");
  const std::size_t G = A.dim(0), m = A.dim(1), kk = A.dim(2), n = B.dim(2);
  auto C = poplar_host::newMappedVariable(graph, outputType, {G, m, n}, nameOf(debugContext, "matMulGrouped"));
  addMatMulStep(prog, A, B, C, G, m, kk, n, false, 1.0, halfPartials(options, outputType),
                nameOf(debugContext, "matMulGrouped"),
                matMulTemporaries(graph, A, B, {G, m, n}, outputType, options, nameOf(debugContext, "matMulGrouped")));
  return C;
}

poplar::Tensor createMatMulInputLHS(poplar::Graph &graph, const poplar::Type &inputType, const poplar::Type &,
                                    const std::vector<std::size_t> &aShape, const std::vector<std::size_t> &,
                                    const poplar::DebugContext &debugContext, const poplar::OptionFlags &options,
                                    PlanningCache *) {
  checkOptions(options, "createMatMulInputLHS");
  return planned(poplar_host::newMappedVariable(graph, inputType, aShape, nameOf(debugContext, "lhs")));
}
poplar::Tensor createMatMulInputLHS(poplar::Graph &graph, const poplar::Type &dataType,
                                    const std::vector<std::size_t> &aShape, const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &debugContext, const poplar::OptionFlags &options,
                                    PlanningCache *cache) {
  return createMatMulInputLHS(graph, dataType, dataType, aShape, bShape, debugContext, options, cache);
}
poplar::Tensor createMatMulInputRHS(poplar::Graph &graph, const poplar::Type &inputType, const poplar::Type &,
                                    const std::vector<std::size_t> &, const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &debugContext, const poplar::OptionFlags &options,
                                    PlanningCache *) {
  checkOptions(options, "createMatMulInputRHS");
  return planned(poplar_host::newMappedVariable(graph, inputType, bShape, nameOf(debugContext, "rhs")));
}
poplar::Tensor createMatMulInputRHS(poplar::Graph &graph, const poplar::Type &dataType,
                                    const std::vector<std::size_t> &aShape, const std::vector<std::size_t> &bShape,
                                    const poplar::DebugContext &debugContext, const poplar::OptionFlags &options,
                                    PlanningCache *cache) {
  return createMatMulInputRHS(graph, dataType, dataType, aShape, bShape, debugContext, options, cache);
}
poplar::Tensor createMatMulGroupedInputLHS(poplar::Graph &graph, const poplar::Type &inputType,
                                           const poplar::Type &outputType, const std::vector<std::size_t> &aShape,
                                           const std::vector<std::size_t> &bShape,
                                           const poplar::DebugContext &debugContext,
                                           const poplar::OptionFlags &options, PlanningCache *cache) {
  return createMatMulInputLHS(graph, inputType, outputType, aShape, bShape, debugContext, options, cache);
}
poplar::Tensor createMatMulGroupedInputRHS(poplar::Graph &graph, const poplar::Type &inputType,
                                           const poplar::Type &outputType, const std::vector<std::size_t> &aShape,
                                           const std::vector<std::size_t> &bShape,
                                           const poplar::DebugContext &debugContext,
                                           const poplar::OptionFlags &options, PlanningCache *cache) {
  return createMatMulInputRHS(graph, inputType, outputType, aShape, bShape, debugContext, options, cache);
}

// --- ConvParams --------------------------------------------------------------------------

namespace {
unsigned at(const std::vector<unsigned> &v, std::size_t d, unsigned dflt) { return d < v.size() ? v[d] : dflt; }
bool at(const std::vector<bool> &v, std::size_t d) { return d < v.size() && v[d]; }
std::size_t dilated(std::size_t size, unsigned dilation) { return size == 0 ? 0 : (size - 1) * dilation + 1; }
} // namespace

ConvParams::InputTransform::InputTransform(std::size_t n)
    : truncationLower(n, 0), truncationUpper(n, 0), dilation(n, 1), paddingLower(n, 0), paddingUpper(n, 0),
      flip(n, false) {}
ConvParams::InputTransform::InputTransform(std::vector<unsigned> tl, std::vector<unsigned> tu, std::vector<unsigned> d,
                                           std::vector<unsigned> pl, std::vector<unsigned> pu, std::vector<bool> f)
    : truncationLower(std::move(tl)), truncationUpper(std::move(tu)), dilation(std::move(d)),
      paddingLower(std::move(pl)), paddingUpper(std::move(pu)), flip(std::move(f)) {}
bool operator==(const ConvParams::InputTransform &a, const ConvParams::InputTransform &b) {
  return a.truncationLower == b.truncationLower && a.truncationUpper == b.truncationUpper &&
         a.dilation == b.dilation && a.paddingLower == b.paddingLower && a.paddingUpper == b.paddingUpper &&
         a.flip == b.flip;
}

ConvParams::OutputTransform::OutputTransform(std::size_t n)
    : truncationLower(n, 0), truncationUpper(n, 0), stride(n, 1), paddingLower(n, 0), paddingUpper(n, 0) {}
ConvParams::OutputTransform::OutputTransform(std::vector<unsigned> tl, std::vector<unsigned> tu,
                                             std::vector<unsigned> s, std::vector<unsigned> pl,
                                             std::vector<unsigned> pu)
    : truncationLower(std::move(tl)), truncationUpper(std::move(tu)), stride(std::move(s)),
      paddingLower(std::move(pl)), paddingUpper(std::move(pu)) {}
bool operator==(const ConvParams::OutputTransform &a, const ConvParams::OutputTransform &b) {
  return a.truncationLower == b.truncationLower && a.truncationUpper == b.truncationUpper && a.stride == b.stride &&
         a.paddingLower == b.paddingLower && a.paddingUpper == b.paddingUpper;
}

ConvParams::ConvParams(poplar::Type dataType, std::size_t batchSize, std::vector<std::size_t> inputFieldShape,
                       std::vector<std::size_t> kernelShape, std::size_t inputChannelsPerConvGroup,
                       std::size_t outputChannelsPerConvGroup, std::size_t numConvGroups)
    : ConvParams(dataType, dataType, batchSize, std::move(inputFieldShape), std::move(kernelShape),
                 inputChannelsPerConvGroup, outputChannelsPerConvGroup, numConvGroups) {}

ConvParams::ConvParams(poplar::Type inputType, poplar::Type outputType, std::size_t batchSize,
                       std::vector<std::size_t> inputFieldShape, std::vector<std::size_t> kernelShape,
                       std::size_t inputChannelsPerConvGroup, std::size_t outputChannelsPerConvGroup,
                       std::size_t numConvGroups)
    : inputType(inputType), outputType(outputType), batchSize(batchSize), inputFieldShape(std::move(inputFieldShape)),
      kernelShape(std::move(kernelShape)), inputChannelsPerConvGroup(inputChannelsPerConvGroup),
      outputChannelsPerConvGroup(outputChannelsPerConvGroup), numConvGroups(numConvGroups),
      inputTransform(this->inputFieldShape.size()), kernelTransform(this->inputFieldShape.size()),
      outputTransform(this->inputFieldShape.size()) {}

ConvParams::ConvParams(poplar::Type inputType, poplar::Type outputType, std::size_t batchSize,
                       std::vector<std::size_t> inputFieldShape, std::vector<std::size_t> kernelShape,
                       std::size_t inputChannelsPerConvGroup, std::size_t outputChannelsPerConvGroup,
                       std::size_t numConvGroups, InputTransform inputTransform, InputTransform kernelTransform,
                       OutputTransform outputTransform)
    : inputType(inputType), outputType(outputType), batchSize(batchSize), inputFieldShape(std::move(inputFieldShape)),
      kernelShape(std::move(kernelShape)), inputChannelsPerConvGroup(inputChannelsPerConvGroup),
      outputChannelsPerConvGroup(outputChannelsPerConvGroup), numConvGroups(numConvGroups),
      inputTransform(std::move(inputTransform)), kernelTransform(std::move(kernelTransform)),
      outputTransform(std::move(outputTransform)) {}

unsigned ConvParams::getTruncatedInputSize(unsigned d) const {
  const std::size_t cut = at(inputTransform.truncationLower, d, 0) + at(inputTransform.truncationUpper, d, 0);
  return static_cast<unsigned>(inputFieldShape[d] > cut ? inputFieldShape[d] - cut : 0);
}
unsigned ConvParams::getTruncatedKernelSize(unsigned d) const {
  const std::size_t cut = at(kernelTransform.truncationLower, d, 0) + at(kernelTransform.truncationUpper, d, 0);
  return static_cast<unsigned>(kernelShape[d] > cut ? kernelShape[d] - cut : 0);
}
unsigned ConvParams::getTransformedInputSize(unsigned d) const {
  return static_cast<unsigned>(dilated(getTruncatedInputSize(d), at(inputTransform.dilation, d, 1)) +
                               at(inputTransform.paddingLower, d, 0) + at(inputTransform.paddingUpper, d, 0));
}
unsigned ConvParams::getTransformedKernelSize(unsigned d) const {
  return static_cast<unsigned>(dilated(getTruncatedKernelSize(d), at(kernelTransform.dilation, d, 1)) +
                               at(kernelTransform.paddingLower, d, 0) + at(kernelTransform.paddingUpper, d, 0));
}
std::size_t ConvParams::getUntransformedOutputSize(unsigned d) const {
  const std::size_t in = getTransformedInputSize(d), k = getTransformedKernelSize(d);
  return in + 1 > k ? in + 1 - k : 0;
}
std::size_t ConvParams::getOutputSize(unsigned d) const {
  const std::size_t raw = getUntransformedOutputSize(d);
  const std::size_t cut = at(outputTransform.truncationLower, d, 0) + at(outputTransform.truncationUpper, d, 0);
  const std::size_t truncated = raw > cut ? raw - cut : 0;
  const unsigned stride = at(outputTransform.stride, d, 1);
  const std::size_t strided = truncated == 0 ? 0 : (truncated - 1) / stride + 1;
  return strided + at(outputTransform.paddingLower, d, 0) + at(outputTransform.paddingUpper, d, 0);
}
std::vector<std::size_t> ConvParams::getOutputFieldShape() const {
  std::vector<std::size_t> s;
  for (unsigned d = 0; d < inputFieldShape.size(); ++d) s.push_back(getOutputSize(d));
  return s;
}

void ConvParams::validate() const {
  const std::size_t F = inputFieldShape.size();
  if (kernelShape.size() != F)
    throw poputil::poplibs_error(message("ConvParams: kernel shape ", shapeString(kernelShape),
                                         " and input field shape ", shapeString(inputFieldShape),
                                         " differ in rank"));
  auto checkLen = [&](std::size_t n, const char *what) {
    if (n != 0 && n != F)
      throw poputil::poplibs_error(message("ConvParams: ", what, " has ", n, " entries for ", F, " field dimensions"));
  };
  for (const auto *t : {&inputTransform, &kernelTransform}) {
    checkLen(t->truncationLower.size(), "truncationLower");
    checkLen(t->truncationUpper.size(), "truncationUpper");
    checkLen(t->dilation.size(), "dilation");
    checkLen(t->paddingLower.size(), "paddingLower");
    checkLen(t->paddingUpper.size(), "paddingUpper");
    checkLen(t->flip.size(), "flip");
    for (auto d : t->dilation)
      if (d == 0) throw poputil::poplibs_error("ConvParams: dilation must be at least 1");
  }
  checkLen(outputTransform.stride.size(), "stride");
  for (auto s : outputTransform.stride)
    if (s == 0) throw poputil::poplibs_error("ConvParams: stride must be at least 1");
  if (numConvGroups == 0) throw poputil::poplibs_error("ConvParams: numConvGroups must be at least 1");
  for (unsigned d = 0; d < F; ++d)
    if (getTransformedKernelSize(d) > getTransformedInputSize(d))
      throw poputil::poplibs_error(message("ConvParams: in field dimension ", d, " the kernel (",
                                           getTransformedKernelSize(d), " after its transforms) is larger than the "
                                           "input (", getTransformedInputSize(d), " after padding and dilation)"));
}

bool operator==(const ConvParams &a, const ConvParams &b) {
  return a.inputType == b.inputType && a.outputType == b.outputType && a.batchSize == b.batchSize &&
         a.inputFieldShape == b.inputFieldShape && a.kernelShape == b.kernelShape &&
         a.inputChannelsPerConvGroup == b.inputChannelsPerConvGroup &&
         a.outputChannelsPerConvGroup == b.outputChannelsPerConvGroup && a.numConvGroups == b.numConvGroups &&
         a.inputTransform == b.inputTransform && a.kernelTransform == b.kernelTransform &&
         a.outputTransform == b.outputTransform;
}

std::ostream &operator<<(std::ostream &os, const ConvParams &p) {
  return os << "ConvParams{" << p.inputType << "->" << p.outputType << ", batch " << p.batchSize << ", field "
            << shapeString(p.inputFieldShape) << ", kernel " << shapeString(p.kernelShape) << ", groups "
            << p.numConvGroups << " x (" << p.inputChannelsPerConvGroup << " -> " << p.outputChannelsPerConvGroup
            << ")}";
}

// --- convolution -----------------------------------------------------------------------

namespace {

/// Position in a transformed (truncated, dilated, padded, flipped) dimension
/// -> position in the original, or -1 for an inserted zero.
std::vector<long> transformMap(std::size_t size, const ConvParams::InputTransform &t, unsigned d) {
  const unsigned tl = at(t.truncationLower, d, 0), tu = at(t.truncationUpper, d, 0);
  const unsigned dil = at(t.dilation, d, 1), pl = at(t.paddingLower, d, 0), pu = at(t.paddingUpper, d, 0);
  const std::size_t truncated = size > tl + tu ? size - tl - tu : 0;
  const std::size_t dil_n = dilated(truncated, dil);
  const std::size_t total = dil_n + pl + pu;
  std::vector<long> map(total, -1);
  for (std::size_t i = 0; i < total; ++i) {
    const std::size_t j = at(t.flip, d) ? total - 1 - i : i; // undo the flip
    if (j < pl || j >= pl + dil_n) continue;
    const std::size_t k = j - pl;
    if (k % dil != 0) continue;
    map[i] = static_cast<long>(k / dil + tl);
  }
  return map;
}

/// Output position -> untransformed output position, or -1 for padding.
std::vector<long> outputMap(const ConvParams &p, unsigned d) {
  const auto &t = p.outputTransform;
  const std::size_t raw = p.getUntransformedOutputSize(d);
  const unsigned tl = at(t.truncationLower, d, 0), tu = at(t.truncationUpper, d, 0), s = at(t.stride, d, 1);
  const unsigned pl = at(t.paddingLower, d, 0);
  const std::size_t truncated = raw > tl + tu ? raw - tl - tu : 0;
  const std::size_t strided = truncated == 0 ? 0 : (truncated - 1) / s + 1;
  std::vector<long> map(p.getOutputSize(d), -1);
  for (std::size_t j = 0; j < strided; ++j) map[pl + j] = static_cast<long>(j * s + tl);
  return map;
}

/// Row-major flat index of a multi-index.
template <class V> std::size_t flatIndex(const V &idx, const std::vector<std::size_t> &shape) {
  std::size_t f = 0;
  for (std::size_t d = 0; d < shape.size(); ++d) f = f * shape[d] + static_cast<std::size_t>(idx[d]);
  return f;
}

/// Calls fn(multiIndex) for every index of shape, row-major.
template <class F> void forEachIndex(const std::vector<std::size_t> &shape, F &&fn) {
  const std::size_t n = poplar_host::product(shape);
  std::vector<std::size_t> idx(shape.size(), 0);
  for (std::size_t i = 0; i < n; ++i) {
    fn(idx);
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
}

/// The convolution's geometry with its transforms resolved, fixed at graph construction:
///   kernelPos[k'] -> kernel element (flat) or -1, per transformed kernel position
///   inputAt[k'][j] -> input element (flat) feeding output j through k', or -1
poplar_host::ConvGeometry convGeometry(const ConvParams &params, bool transposeAndFlipWeights) {
  const std::size_t F = params.getNumFieldDims();
  const auto outField = params.getOutputFieldShape();
  std::vector<std::size_t> tKernelShape, tInputShape;
  std::vector<std::vector<long>> inMap(F), kMap(F), oMap(F);
  for (unsigned d = 0; d < F; ++d) {
    inMap[d] = transformMap(params.inputFieldShape[d], params.inputTransform, d);
    kMap[d] = transformMap(params.kernelShape[d], params.kernelTransform, d);
    oMap[d] = outputMap(params, d);
    tKernelShape.push_back(kMap[d].size());
    tInputShape.push_back(inMap[d].size());
  }
  const std::size_t outN = poplar_host::product(outField), kN = poplar_host::product(params.kernelShape);
  std::vector<long> kernelPos;
  std::vector<std::vector<long>> inputAt;
  forEachIndex(tKernelShape, [&](const std::vector<std::size_t> &kt) {
    std::vector<long> k(F);
    for (unsigned d = 0; d < F; ++d) k[d] = kMap[d][kt[d]];
    if (std::find(k.begin(), k.end(), -1L) != k.end()) return; // an inserted zero of the kernel
    std::vector<std::size_t> kIdx(k.begin(), k.end());
    if (transposeAndFlipWeights)
      for (unsigned d = 0; d < F; ++d) kIdx[d] = params.kernelShape[d] - 1 - kIdx[d];
    kernelPos.push_back(static_cast<long>(flatIndex(kIdx, params.kernelShape)));
    std::vector<long> row(outN, -1);
    std::size_t j = 0;
    forEachIndex(outField, [&](const std::vector<std::size_t> &o) {
      std::vector<std::size_t> iIdx(F);
      bool valid = true;
      for (unsigned d = 0; d < F && valid; ++d) {
        const long raw = oMap[d][o[d]];
        if (raw < 0) valid = false;
        else {
          const long i = inMap[d][static_cast<std::size_t>(raw) + kt[d]];
          if (i < 0) valid = false;
          else iIdx[d] = static_cast<std::size_t>(i);
        }
      }
      if (valid) row[j] = static_cast<long>(flatIndex(iIdx, params.inputFieldShape));
      ++j;
    });
    inputAt.push_back(std::move(row));
  });
  poplar_host::ConvGeometry geo;
  geo.N = params.batchSize, geo.G = params.numConvGroups;
  geo.Ci = params.inputChannelsPerConvGroup, geo.Co = params.outputChannelsPerConvGroup;
  geo.inN = poplar_host::product(params.inputFieldShape), geo.outN = outN, geo.kN = kN;
  geo.transposed = transposeAndFlipWeights, geo.kernelPos = std::move(kernelPos), geo.inputAt = std::move(inputAt);
  geo.runs = poplar_host::positionRuns(geo);
  geo.plain2D = F == 2 && geo.kernelPos.size() == kN;
  const auto &in = params.inputTransform, &kt = params.kernelTransform;
  for (unsigned d = 0; d < F && geo.plain2D; ++d)
    geo.plain2D = in.truncationLower[d] == 0 && in.truncationUpper[d] == 0 && in.dilation[d] == 1 && !in.flip[d] &&
                  kt.truncationLower[d] == 0 && kt.truncationUpper[d] == 0 && kt.dilation[d] == 1 &&
                  kt.paddingLower[d] == 0 && kt.paddingUpper[d] == 0 && params.outputTransform.truncationLower[d] == 0 &&
                  params.outputTransform.truncationUpper[d] == 0 &&
                  params.outputTransform.paddingLower[d] == 0 && params.outputTransform.paddingUpper[d] == 0;
  if (geo.plain2D)
    geo.plain = {params.inputFieldShape[0], params.inputFieldShape[1], params.kernelShape[0], params.kernelShape[1],
                 in.paddingLower[0], in.paddingLower[1], outField[0], outField[1],
                 params.outputTransform.stride[0], params.outputTransform.stride[1]};
  return geo;
}

} // namespace

poplar::Tensor createWeights(poplar::Graph &graph, const ConvParams &params, const poplar::DebugContext &debugContext,
                             const poplar::OptionFlags &options, PlanningCache *) {
  params.validate();
  checkConvOptions(options, "createWeights");
  std::vector<std::size_t> shape{params.numConvGroups, params.outputChannelsPerConvGroup,
                                 params.inputChannelsPerConvGroup};
  shape.insert(shape.end(), params.kernelShape.begin(), params.kernelShape.end());
  return planned(poplar_host::newMappedVariable(graph, params.inputType, shape, nameOf(debugContext, "weights")),
                 PlannedLayout::Conv);
}

poplar::Tensor createInput(poplar::Graph &graph, const ConvParams &params, const poplar::DebugContext &debugContext,
                           const poplar::OptionFlags &options, PlanningCache *) {
  params.validate();
  checkConvOptions(options, "createInput");
  std::vector<std::size_t> shape{params.batchSize, params.getNumInputChans()};
  shape.insert(shape.end(), params.inputFieldShape.begin(), params.inputFieldShape.end());
  return planned(poplar_host::newMappedVariable(graph, params.inputType, shape, nameOf(debugContext, "input")),
                 PlannedLayout::Conv);
}

poplar::Tensor convolution(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Tensor &weights,
                           const ConvParams &params, bool transposeAndFlipWeights, poplar::program::Sequence &prog,
                           const poplar::DebugContext &debugContext, const poplar::OptionFlags &options,
                           PlanningCache *) {
  params.validate();
  checkConvOptions(options, "convolution");
  const std::size_t N = params.batchSize, G = params.numConvGroups;
  const std::size_t Ci = params.inputChannelsPerConvGroup, Co = params.outputChannelsPerConvGroup;
  std::vector<std::size_t> inShape{N, G * Ci}, wShape{G, transposeAndFlipWeights ? Ci : Co,
                                                        transposeAndFlipWeights ? Co : Ci};
  inShape.insert(inShape.end(), params.inputFieldShape.begin(), params.inputFieldShape.end());
  wShape.insert(wShape.end(), params.kernelShape.begin(), params.kernelShape.end());
  if (in.shape() != inShape)
    throw poputil::poplibs_error(message("convolution: input shape ", in.shapeToString(), " should be ",
                                         shapeString(inShape), " for ", params));
  if (weights.shape() != wShape)
    throw poputil::poplibs_error(message("convolution: weights shape ", weights.shapeToString(), " should be ",
                                         shapeString(wShape), transposeAndFlipWeights ? " (transposed)" : "",
                                         " for ", params));
  if (in.elementType() != params.inputType || weights.elementType() != params.inputType)
    throw poputil::poplibs_error(message("convolution: input and weights must be ", params.inputType, ", got ",
                                         in.elementType(), " and ", weights.elementType()));

  const auto outField = params.getOutputFieldShape();
  std::vector<std::size_t> outShape{N, G * Co};
  outShape.insert(outShape.end(), outField.begin(), outField.end());
  auto out = poplar_host::newMappedVariable(graph, params.outputType, outShape, nameOf(debugContext, "conv"));
  // while it runs: the operands rearranged into the plan's layout (unless made in it) and the
  // partial sums in the partials type, for the liveness-based memory accounting
  const std::string tempName = nameOf(debugContext, "convolution");
  std::vector<poplar::Tensor> temps;
  if (!isPlannedOperand(in, PlannedLayout::Conv))
    temps.push_back(poplar_host::newMappedVariable(graph, in.elementType(), in.shape(), tempName + "/inRearranged"));
  if (!isPlannedOperand(weights, PlannedLayout::Conv))
    temps.push_back(poplar_host::newMappedVariable(graph, weights.elementType(), weights.shape(), tempName + "/weightsRearranged"));
  temps.push_back(poplar_host::newMappedVariable(graph, halfPartials(options, params.outputType) ? poplar::HALF : poplar::FLOAT,
                                                 outShape, tempName + "/partials"));

  const poplar_host::ConvGeometry geo = convGeometry(params, transposeAndFlipWeights);
  const std::size_t outN = geo.outN, inN = geo.inN, kN = geo.kN;
  const bool transposed = transposeAndFlipWeights;
  const bool halfSums = halfPartials(options, params.outputType);

  // Each output element sums its products in order: input channel, then kernel position (the
  // positions falling on padding add nothing).
  poplar_host::addHostStep(prog, nameOf(debugContext, "convolution"), [=](ReplicaContext &ctx) {
    poplar_host::Rounder r = ctx.rounder(out);
    PartialSums sums(halfSums, r);
    if (!halfSums) { // float32: unfolded into matrix products (see convkernel.cpp)
      poplar_host::ScratchLease scratch;
      const std::size_t xn = in.numElements(), wn = weights.numElements(), yn = N * G * Co * outN;
      const float *xf = ctx.floatsOf(in, scratch.get(0, xn)), *wf = ctx.floatsOf(weights, scratch.get(1, wn));
      float *direct = ctx.contiguousFloats(out); // a new variable: no operand shares its bytes
      float *y = direct ? direct : scratch.get(2, yn);
      poplar_host::convolutionF32(geo, xf, wf, y);
      sums.finish(y, yn, [&] { return allFiniteF32(xf, xn) && allFiniteF32(wf, wn); });
      ctx.raised(r);
      if (!direct) ctx.writeFloats(out, y);
      return;
    }
    const auto x = ctx.read(in), w = ctx.read(weights);
    std::vector<double> y(N * G * Co * outN, 0.0);
    const std::size_t K = geo.kernelPos.size();
    for (std::size_t n = 0; n < N; ++n)
      for (std::size_t g = 0; g < G; ++g)
        for (std::size_t o = 0; o < Co; ++o) {
          const std::size_t base = ((n * G + g) * Co + o) * outN;
          double *acc = &y[base];
          for (std::size_t c = 0; c < Ci; ++c) {
            const std::size_t xBase = (n * G * Ci + g * Ci + c) * inN;
            const std::size_t wBase = transposed ? ((g * Ci + c) * Co + o) * kN : ((g * Co + o) * Ci + c) * kN;
            for (std::size_t k = 0; k < K; ++k) {
              const std::size_t wi = wBase + static_cast<std::size_t>(geo.kernelPos[k]);
              const long *row = geo.inputAt[k].data();
              const double wv = w[wi];
              for (std::size_t j = 0; j < outN; ++j)
                if (row[j] >= 0) acc[j] = sums.add(acc[j], x[xBase + static_cast<std::size_t>(row[j])], wv, base + j, c * K + k);
            }
          }
        }
    sums.finish(y, allFinite(x) && allFinite(w));
    ctx.raised(r);
    ctx.write(out, y);
  }, [&] {
    std::vector<poplar::Tensor> touches{in, weights, out};
    touches.insert(touches.end(), temps.begin(), temps.end());
    return touches;
  }())->flops = 2 * std::uint64_t(N) * G * Co * outN * Ci * geo.kernelPos.size();
  return out;
}

poplar::Tensor calculateWeightDeltas(poplar::Graph &graph, const poplar::Tensor &zDeltas, const poplar::Tensor &activations,
                                     const ConvParams &params, poplar::program::Sequence &prog,
                                     const poplar::DebugContext &debugContext, const poplar::OptionFlags &options,
                                     PlanningCache *) {
  params.validate();
  checkConvOptions(options, "calculateWeightDeltas");
  const std::size_t N = params.batchSize, G = params.numConvGroups;
  const std::size_t Ci = params.inputChannelsPerConvGroup, Co = params.outputChannelsPerConvGroup;
  const auto outField = params.getOutputFieldShape();
  std::vector<std::size_t> actShape{N, G * Ci}, zShape{N, G * Co}, wShape{G, Co, Ci};
  actShape.insert(actShape.end(), params.inputFieldShape.begin(), params.inputFieldShape.end());
  zShape.insert(zShape.end(), outField.begin(), outField.end());
  wShape.insert(wShape.end(), params.kernelShape.begin(), params.kernelShape.end());
  if (activations.shape() != actShape)
    throw poputil::poplibs_error(message("calculateWeightDeltas: activations shape ", activations.shapeToString(),
                                         " should be ", shapeString(actShape), " for ", params));
  if (zDeltas.shape() != zShape)
    throw poputil::poplibs_error(message("calculateWeightDeltas: zDeltas shape ", zDeltas.shapeToString(), " should be ",
                                         shapeString(zShape), " for ", params));
  if (activations.elementType() != params.inputType || zDeltas.elementType() != params.outputType)
    throw poputil::poplibs_error(message("calculateWeightDeltas: activations must be ", params.inputType,
                                         " and zDeltas ", params.outputType, ", got ", activations.elementType(),
                                         " and ", zDeltas.elementType()));

  // the deltas lie like the weights createWeights makes: [G, Co, Ci, kernel...]
  auto out = poplar_host::newMappedVariable(graph, params.inputType, wShape, nameOf(debugContext, "weightDeltas"));
  // while it runs: the operands rearranged into the plan's layout (unless made in it) and the
  // partial sums in the partials type, for the liveness-based memory accounting
  const std::string tempName = nameOf(debugContext, "calculateWeightDeltas");
  const bool halfSums = halfPartials(options, params.inputType);
  std::vector<poplar::Tensor> temps;
  if (!isPlannedOperand(zDeltas, PlannedLayout::Conv))
    temps.push_back(poplar_host::newMappedVariable(graph, zDeltas.elementType(), zDeltas.shape(), tempName + "/zDeltasRearranged"));
  if (!isPlannedOperand(activations, PlannedLayout::Conv))
    temps.push_back(poplar_host::newMappedVariable(graph, activations.elementType(), activations.shape(), tempName + "/activationsRearranged"));
  temps.push_back(poplar_host::newMappedVariable(graph, halfSums ? poplar::HALF : poplar::FLOAT, wShape, tempName + "/partials"));

  const poplar_host::ConvGeometry geo = convGeometry(params, false);
  const std::size_t outN = geo.outN, inN = geo.inN, kN = geo.kN;

  // Each weight delta sums its products in order: sample, then output position (the positions
  // whose tap falls on padding add nothing); kernel elements no position reads stay zero.
  poplar_host::addHostStep(prog, nameOf(debugContext, "calculateWeightDeltas"), [=](ReplicaContext &ctx) {
    poplar_host::Rounder r = ctx.rounder(out);
    PartialSums sums(halfSums, r);
    const std::size_t wn = G * Co * Ci * kN;
    if (!halfSums) { // float32: one matrix product per conv group (see convkernel.cpp)
      poplar_host::ScratchLease scratch;
      const std::size_t xn = activations.numElements(), zn = zDeltas.numElements();
      const float *xf = ctx.floatsOf(activations, scratch.get(0, xn)), *zf = ctx.floatsOf(zDeltas, scratch.get(1, zn));
      float *direct = ctx.contiguousFloats(out); // a new variable: no operand shares its bytes
      float *dw = direct ? direct : scratch.get(2, wn);
      poplar_host::weightDeltasF32(geo, zf, xf, dw);
      sums.finish(dw, wn, [&] { return allFiniteF32(xf, xn) && allFiniteF32(zf, zn); });
      ctx.raised(r);
      if (!direct) ctx.writeFloats(out, dw);
      return;
    }
    const auto x = ctx.read(activations), z = ctx.read(zDeltas);
    std::vector<double> dw(wn, 0.0);
    const std::size_t K = geo.kernelPos.size();
    for (std::size_t g = 0; g < G; ++g)
      for (std::size_t o = 0; o < Co; ++o)
        for (std::size_t c = 0; c < Ci; ++c)
          for (std::size_t k = 0; k < K; ++k) {
            const std::size_t wi = ((g * Co + o) * Ci + c) * kN + static_cast<std::size_t>(geo.kernelPos[k]);
            const long *row = geo.inputAt[k].data();
            double acc = 0.0;
            std::uint64_t step = 0;
            for (std::size_t n = 0; n < N; ++n) {
              const std::size_t xBase = (n * G * Ci + g * Ci + c) * inN, zBase = (n * G * Co + g * Co + o) * outN;
              for (std::size_t j = 0; j < outN; ++j)
                if (row[j] >= 0) acc = sums.add(acc, z[zBase + j], x[xBase + static_cast<std::size_t>(row[j])], wi, step++);
            }
            dw[wi] = acc;
          }
    sums.finish(dw, allFinite(x) && allFinite(z));
    ctx.raised(r);
    ctx.write(out, dw);
  }, [&] {
    std::vector<poplar::Tensor> touches{zDeltas, activations, out};
    touches.insert(touches.end(), temps.begin(), temps.end());
    return touches;
  }())->flops = 2 * std::uint64_t(N) * G * Co * outN * Ci * geo.kernelPos.size();
  return out;
}

poplar::Tensor createBiases(poplar::Graph &graph, const poplar::Tensor &acts, const poplar::DebugContext &debugContext) {
  if (acts.rank() < 2) throw poputil::poplibs_error("createBiases: activations need a channel dimension");
  return poplar_host::newMappedVariable(graph, acts.elementType(), {acts.dim(1)}, nameOf(debugContext, "biases"));
}

void addBias(poplar::Graph &, const poplar::Tensor &acts, const poplar::Tensor &biases, poplar::program::Sequence &prog,
             const poplar::DebugContext &debugContext) {
  if (acts.rank() < 2 || biases.rank() != 1 || biases.dim(0) != acts.dim(1))
    throw poputil::poplibs_error(message("addBias: biases ", biases.shapeToString(), " do not match activations ",
                                         acts.shapeToString()));
  const std::size_t C = acts.dim(1), inner = acts.numElements() / (acts.dim(0) * C);
  poplar_host::addHostStep(prog, nameOf(debugContext, "addBias"), [=](ReplicaContext &ctx) {
    auto a = ctx.read(acts);
    const auto b = ctx.read(biases);
    for (std::size_t i = 0; i < a.size(); ++i) a[i] += b[(i / inner) % C];
    ctx.write(acts, a);
  }, {acts, biases});
}

} // namespace poplin
