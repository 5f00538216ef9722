// popops: reductions, casts, fills and dynamic slicing, computed on the host
// when the program runs (one HostStep per call). Values are read exactly;
// sums and products accumulate in the type PopLibs accumulates in (one
// rounding per step), everything else is computed exactly and rounded once
// to the output type, as the tile of the output rounds.
#include "gemm.hpp" // ScratchLease
#include "internal.hpp"
#include "reducekernel.hpp"

#include <popops/Cast.hpp>
#include <popops/DynamicSlice.hpp>
#include <popops/Fill.hpp>
#include <popops/Operation.hpp>
#include <popops/Reduce.hpp>
#include <popops/Zero.hpp>
#include <popops/codelets.hpp>
#include <poplar/exceptions.hpp>
#include <poputil/exceptions.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

// a fused multiply-add would skip the rounding of SQUARE_ADD's product, which the numerics keep
#pragma GCC optimize("fp-contract=off")

using poplar_host::message;
using poplar_host::ReplicaContext;
using poplar_host::shapeString;

namespace popops {

void addCodelets(poplar::Graph &) {}

std::ostream &operator<<(std::ostream &os, const Operation &op) {
  static const char *names[] = {"ADD", "MUL", "MIN", "MAX", "LOGICAL_AND", "LOGICAL_OR", "SQUARE_ADD", "LOG_ADD"};
  return os << names[static_cast<int>(op)];
}

namespace {

std::string nameOf(const poplar::DebugContext &dc, const char *op) {
  return dc.getPathName().empty() ? std::string(op) : dc.getPathName() + "/" + op;
}

bool isInteger(const poplar::Type &t) { return !t.isFloatingPoint(); }

// --- reduce --------------------------------------------------------------------------

std::vector<std::size_t> reducedShape(const poplar::Tensor &in, const std::vector<std::size_t> &dims,
                                      std::vector<bool> &reduced) {
  const auto shape = in.shape();
  reduced.assign(shape.size(), false);
  for (auto d : dims) {
    if (d >= shape.size())
      throw poputil::poplibs_error(message("reduce: dimension ", d, " out of range for shape ", shapeString(shape)));
    if (reduced[d]) throw poputil::poplibs_error(message("reduce: dimension ", d, " given twice"));
    reduced[d] = true;
  }
  std::vector<std::size_t> out;
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d]) out.push_back(shape[d]);
  return out;
}

/// Output element of each input element (row-major).
std::vector<std::size_t> outputIndex(const std::vector<std::size_t> &shape, const std::vector<bool> &reduced) {
  const std::size_t n = poplar_host::product(shape);
  std::vector<std::size_t> idx(shape.size(), 0), map(n);
  std::vector<std::size_t> outStride(shape.size(), 0);
  std::size_t acc = 1;
  for (std::size_t d = shape.size(); d-- > 0;)
    if (!reduced[d]) {
      outStride[d] = acc;
      acc *= shape[d];
    }
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t o = 0;
    for (std::size_t d = 0; d < shape.size(); ++d) o += idx[d] * outStride[d];
    map[i] = o;
    for (std::size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d]) break;
      idx[d] = 0;
    }
  }
  return map;
}

void checkReduceTypes(const poplar::Type &in, const poplar::Type &out, Operation op) {
  const bool logical = op == Operation::LOGICAL_AND || op == Operation::LOGICAL_OR;
  if (logical && (in != poplar::BOOL || out != poplar::BOOL))
    throw poputil::poplibs_error(message("reduce: ", op, " needs bool input and output, got ", in, " -> ", out));
  if (!logical && (in == poplar::BOOL))
    throw poputil::poplibs_error(message("reduce: ", op, " of a bool tensor"));
  // libpopops has no unsigned vertices for these (its reduce codelets are float, half and int)
  const bool arithmetic = op == Operation::ADD || op == Operation::SQUARE_ADD || op == Operation::MUL;
  if (arithmetic && (in == poplar::UNSIGNED_INT || in == poplar::UNSIGNED_SHORT || in == poplar::UNSIGNED_CHAR))
    throw poputil::poplibs_error(message("reduce: no ", op, " reduction of ", in, " in PopLibs (reduce the same bits as int)"));
  // nor 8- or 16-bit integer vertices of any operation
  if (in.size() < 4 && in != poplar::BOOL && in != poplar::HALF)
    throw poputil::poplibs_error(message("reduce: no ", op, " reduction of ", in, " in PopLibs (reduce an int copy)"));
}

enum class Accum { Exact, Float, Half };

/// The type sums and products accumulate in: accumType.inVertex / accumType.interTile when set
/// (the lower precision of the two: the emulation sums in one stage), never below the output
/// type; by default float for a half input of ADD, SQUARE_ADD and MUL, else the input type.
/// Integers, MIN, MAX and the logical operations are exact.
Accum accumulationType(const poplar::Type &in, const poplar::Type &out, Operation op, const poplar::OptionFlags &o) {
  if (!in.isFloatingPoint() || !(op == Operation::ADD || op == Operation::SQUARE_ADD || op == Operation::MUL))
    return Accum::Exact;
  auto isHalf = [](const std::string &v) { return v == "half" || v == "HALF"; };
  auto check = [](const char *key, const std::string &v) {
    if (!v.empty() && v != "float" && v != "half" && v != "FLOAT" && v != "HALF")
      throw poplar::invalid_option(message("reduce: invalid value '", v, "' for option ", key, " (float or half)"));
  };
  const std::string inVertex = o.get("accumType.inVertex", ""), interTile = o.get("accumType.interTile", "");
  check("accumType.inVertex", inVertex);
  check("accumType.interTile", interTile);
  if (out != poplar::HALF) return Accum::Float;
  if (inVertex.empty() && interTile.empty()) return Accum::Float; // float for a half ADD/SQUARE_ADD/MUL, or float input
  return isHalf(inVertex) || isHalf(interTile) ? Accum::Half : Accum::Float;
}

/// A reduction's last steps: flags for the finished sums, the scale, the update, the output.
/// `finiteInput()` says whether every input was finite (an infinite float sum of finite inputs
/// overflowed); it is only asked when a sum is infinite.
template <class FiniteInput>
void finishReduce(const ReplicaContext &ctx, poplar_host::Rounder &r, std::vector<double> &acc,
                  const FiniteInput &finiteInput, Accum accum, const ReduceParams &params, const poplar::Tensor &out) {
  if (accum != Accum::Exact) {
    for (double a : acc) {
      if (std::isnan(a)) r.flags |= poplar_host::kFpInvalid;
      else if (std::isinf(a) && accum == Accum::Float && !(r.flags & poplar_host::kFpOverflow) && finiteInput())
        r.flags |= poplar_host::kFpOverflow;
    }
    ctx.raised(r);
  }
  if (params.useScale) {
    const double s = ctx.read(params.scale)[0];
    for (auto &a : acc) a *= s;
  }
  if (params.update) {
    const auto prev = ctx.read(out);
    for (std::size_t o = 0; o < acc.size(); ++o) acc[o] += prev[o];
  }
  ctx.write(out, acc);
}

template <class T> bool allFinite(const T *x, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return false;
  return true;
}

void addReduceStep(poplar::program::Sequence &prog, const poplar::Tensor &in, const poplar::Tensor &out,
                   const std::vector<std::size_t> &dims, const ReduceParams &params, const std::string &name,
                   const poplar::OptionFlags &options) {
  std::vector<bool> reduced;
  const auto outShape = reducedShape(in, dims, reduced);
  if (poplar_host::product(outShape) != out.numElements())
    throw poputil::poplibs_error(message("reduce: output shape ", out.shapeToString(), " should be ",
                                         shapeString(outShape)));
  checkReduceTypes(in.elementType(), out.elementType(), params.op);
  if (params.useScale && params.op != Operation::ADD && params.op != Operation::SQUARE_ADD)
    throw poputil::poplibs_error("reduce: a scale is only allowed with ADD and SQUARE_ADD");
  if (params.useScale && params.scale.numElements() != 1)
    throw poputil::poplibs_error("reduce: the scale must be a single element");
  const std::size_t outN = out.numElements();
  const Operation op = params.op;
  const Accum accum = accumulationType(in.elementType(), out.elementType(), op, options);
  // float sums, and maxima and minima of floating-point inputs (exact in float), run on floats
  const bool extremum = (op == Operation::MAX || op == Operation::MIN) && in.elementType().isFloatingPoint();
  const bool onFloats = accum == Accum::Float || extremum;
  // steps on floats find each output's inputs by the layout, the others by the output of each input
  const auto layout = std::make_shared<const poplar_host::ReduceLayout>(
      onFloats ? poplar_host::reduceLayout(in.shape(), reduced) : poplar_host::ReduceLayout{});
  const auto map = onFloats ? std::vector<std::size_t>{} : outputIndex(in.shape(), reduced);
  // Each output accumulates its inputs in row-major order, one rounding per step.
  poplar_host::addHostStep(prog, name, [=](ReplicaContext &ctx) {
    poplar_host::Rounder r = ctx.rounder(out);
    if (onFloats) { // steps on the floats themselves, without doubles
      poplar_host::ScratchLease scratch;
      const std::size_t n = in.numElements();
      float *acc = scratch.get(1, outN);
      const float *x = ctx.floatsOf(in, scratch.get(0, n));
      using poplar_host::ReduceStep;
      poplar_host::reduceFloats(op == Operation::ADD          ? ReduceStep::Add
                                : op == Operation::SQUARE_ADD ? ReduceStep::SquareAdd
                                : op == Operation::MUL        ? ReduceStep::Mul
                                : op == Operation::MAX        ? ReduceStep::Max
                                                              : ReduceStep::Min,
                                x, *layout, acc);
      std::vector<double> sums(acc, acc + outN);
      return finishReduce(ctx, r, sums, [&] { return allFinite(x, n); }, accum, params, out);
    }
    const auto x = ctx.read(in);
    std::vector<double> acc(outN);
    const double inf = std::numeric_limits<double>::infinity();
    switch (op) {
    case Operation::ADD:
    case Operation::SQUARE_ADD:
    case Operation::LOGICAL_OR: std::fill(acc.begin(), acc.end(), 0.0); break;
    case Operation::MUL:
    case Operation::LOGICAL_AND: std::fill(acc.begin(), acc.end(), 1.0); break;
    case Operation::MIN: std::fill(acc.begin(), acc.end(), inf); break;
    case Operation::MAX:
    case Operation::LOG_ADD: std::fill(acc.begin(), acc.end(), -inf); break;
    }
    auto step = [&](double exact, std::size_t o, std::size_t i) {
      if (accum == Accum::Half) return r.toHalf(exact, o, i);
      return exact; // Float steps are computed in float below
    };
    for (std::size_t i = 0; i < x.size(); ++i) {
      double &a = acc[map[i]];
      const double v = x[i];
      if (accum == Accum::Float) {
        const float fa = static_cast<float>(a), fv = static_cast<float>(v);
        a = op == Operation::ADD ? fa + fv : op == Operation::SQUARE_ADD ? fa + fv * fv : fa * fv;
        continue;
      }
      switch (op) {
      case Operation::ADD: a = step(a + v, map[i], i); break;
      case Operation::SQUARE_ADD: a = step(a + v * v, map[i], i); break;
      case Operation::MUL: a = step(a * v, map[i], i); break;
      case Operation::MIN: a = std::isnan(v) || v < a ? v : a; break;
      case Operation::MAX:
      case Operation::LOG_ADD: a = std::isnan(v) || v > a ? v : a; break; // LOG_ADD: the max first
      case Operation::LOGICAL_AND: a = (a != 0 && v != 0) ? 1 : 0; break;
      case Operation::LOGICAL_OR: a = (a != 0 || v != 0) ? 1 : 0; break;
      }
    }
    if (op == Operation::LOG_ADD) { // log(sum(exp(x))) = m + log(sum(exp(x - m)))
      std::vector<double> sum(outN, 0.0);
      for (std::size_t i = 0; i < x.size(); ++i)
        if (std::isfinite(acc[map[i]])) sum[map[i]] += std::exp(x[i] - acc[map[i]]);
      for (std::size_t o = 0; o < outN; ++o)
        if (std::isfinite(acc[o])) acc[o] += std::log(sum[o]);
    }
    finishReduce(ctx, r, acc, [&] { return allFinite(x.data(), x.size()); }, accum, params, out);
  }, {in, out, params.useScale ? params.scale : poplar::Tensor()});
}

} // namespace

poplar::Tensor reduce(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Type &outType,
                      const std::vector<std::size_t> &dims, ReduceParams params, poplar::program::Sequence &prog,
                      const poplar::DebugContext &debugContext, const poplar::OptionFlags &options) {
  if (params.update) throw poputil::poplibs_error("reduce: update needs an output; use reduceWithOutput");
  std::vector<bool> reduced;
  const auto outShape = reducedShape(in, dims, reduced);
  auto out = poplar_host::newMappedVariable(graph, outType, outShape, nameOf(debugContext, "reduce"));
  addReduceStep(prog, in, out, dims, params, nameOf(debugContext, "reduce"), options);
  return out;
}

poplar::Tensor reduce(poplar::Graph &graph, const poplar::Tensor &in, const std::vector<std::size_t> &dims,
                      ReduceParams params, poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                      const poplar::OptionFlags &options) {
  return reduce(graph, in, in.elementType(), dims, params, prog, debugContext, options);
}

void reduceWithOutput(poplar::Graph &graph, const poplar::Tensor &in, const poplar::Tensor &out,
                      const std::vector<std::size_t> &dims, ReduceParams params, poplar::program::Sequence &prog,
                      const poplar::DebugContext &debugContext, const poplar::OptionFlags &options) {
  bool complete = false;
  graph.getTileMapping(out, &complete);
  if (!complete)
    poplar_host::mapLinearly(graph, out, 1, graph.getTarget().getVectorWidth(out.elementType()));
  addReduceStep(prog, in, out, dims, params, nameOf(debugContext, "reduce"), options);
}

// --- cast, zero, fill -------------------------------------------------------------------

poplar::Tensor cast(poplar::Graph &graph, const poplar::Tensor &src, const poplar::Type &dstType,
                    poplar::program::Sequence &prog, const poplar::DebugContext &debugContext) {
  auto dst = graph.clone(dstType, src, nameOf(debugContext, "cast"));
  prog.add(cast(graph, src, dst, debugContext));
  return dst;
}

poplar::program::Program cast(poplar::Graph &, poplar::Tensor src, poplar::Tensor dst,
                              const poplar::DebugContext &debugContext) {
  if (src.numElements() != dst.numElements())
    throw poputil::poplibs_error(message("cast: source shape ", src.shapeToString(), " and destination shape ",
                                         dst.shapeToString(), " differ in size"));
  poplar::program::Sequence seq;
  if (isInteger(src.elementType()) && isInteger(dst.elementType())) {
    // between integer types the low bits are kept (int -> signed char wraps around), as PopLibs'
    // integer casts convert; from floats, values saturate as the IPU's conversions do
    poplar_host::addHostStep(seq, nameOf(debugContext, "cast"), [=](ReplicaContext &ctx) {
      const std::vector<double> values = ctx.read(src);
      const std::size_t es = dst.elementType().size();
      std::vector<std::uint8_t> bytes(values.size() * es);
      for (std::size_t i = 0; i < values.size(); ++i)
        poplar_host::storeWrappedInteger(dst.elementType().id(), bytes.data() + i * es, static_cast<long long>(values[i]));
      ctx.writeBytes(dst, bytes.data());
    }, {src, dst});
    return std::move(seq);
  }
  poplar_host::addHostStep(
      seq, nameOf(debugContext, "cast"), [=](ReplicaContext &ctx) { ctx.write(dst, ctx.read(src)); }, {src, dst});
  return std::move(seq);
}

void zero(poplar::Graph &, const poplar::Tensor &t, poplar::program::Sequence &prog,
          const poplar::DebugContext &debugContext) {
  if (t.containsConstant()) throw poputil::poplibs_error("zero: the tensor contains a constant");
  poplar_host::addHostStep(prog, nameOf(debugContext, "zero"), [=](ReplicaContext &ctx) {
    std::vector<std::uint8_t> zeros(t.numElements() * t.elementType().size(), 0);
    ctx.writeBytes(t, zeros.data());
  }, {t});
}

namespace detail {
void fillValue(poplar::Graph &, const poplar::Tensor &t, poplar::program::Sequence &prog,
               const poplar_host::ScalarValue &value, const poplar::DebugContext &debugContext) {
  if (t.containsConstant()) throw poputil::poplibs_error("fill: the tensor contains a constant");
  const std::size_t es = t.elementType().size();
  std::vector<std::uint8_t> bytes(t.numElements() * es);
  for (std::size_t i = 0; i < t.numElements(); ++i)
    poplar_host::storeScalarValue(t.elementType().id(), bytes.data() + i * es, value);
  poplar_host::addHostStep(
      prog, nameOf(debugContext, "fill"), [=](ReplicaContext &ctx) { ctx.writeBytes(t, bytes.data()); }, {t});
}
} // namespace detail

// --- dynamic slices ---------------------------------------------------------------------

namespace {

std::vector<std::size_t> stridesOf(const std::vector<std::size_t> &shape) {
  std::vector<std::size_t> s(shape.size());
  std::size_t acc = 1;
  for (std::size_t d = shape.size(); d-- > 0;) {
    s[d] = acc;
    acc *= shape[d];
  }
  return s;
}

void checkSliceArgs(const char *op, const poplar::Tensor &t, const std::vector<std::size_t> &dims,
                    const std::vector<std::size_t> &sizes) {
  // PopLibs' slice and update vertices cover 8-bit integers but no 16-bit ones
  if (t.elementType() == poplar::SHORT || t.elementType() == poplar::UNSIGNED_SHORT)
    throw poputil::poplibs_error(message(op, ": no vertices for ", t.elementType(), " in PopLibs"));
  if (dims.size() != sizes.size())
    throw poputil::poplibs_error(message(op, ": ", dims.size(), " dims but ", sizes.size(), " sizes"));
  std::vector<bool> seen(t.rank(), false);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] >= t.rank() || seen[dims[i]])
      throw poputil::poplibs_error(message(op, ": bad dimension ", dims[i], " for shape ", t.shapeToString()));
    seen[dims[i]] = true;
    if (sizes[i] > t.dim(static_cast<unsigned>(dims[i])))
      throw poputil::poplibs_error(message(op, ": slice size ", sizes[i], " exceeds dimension ", dims[i],
                                           " of shape ", t.shapeToString()));
  }
}

void checkOffsetType(const char *op, const poplar::Tensor &offset) {
  if (!isInteger(offset.elementType()) || offset.elementType() == poplar::BOOL)
    throw poputil::poplibs_error(message(op, ": offsets must be integers, got ", offset.elementType()));
}

std::vector<std::size_t> slicedShape(const poplar::Tensor &t, const std::vector<std::size_t> &dims,
                                     const std::vector<std::size_t> &sizes) {
  auto shape = t.shape();
  for (std::size_t i = 0; i < dims.size(); ++i) shape[dims[i]] = sizes[i];
  return shape;
}

/// For each element of a slice of `sliceShape` starting at `starts` (per
/// dim), the element of t (row-major) it comes from; dimensions wrap.
void sliceIndices(const std::vector<std::size_t> &tShape, const std::vector<std::size_t> &sliceShape,
                  const std::vector<std::size_t> &starts, std::vector<std::size_t> &out) {
  const auto tStride = stridesOf(tShape);
  const std::size_t n = poplar_host::product(sliceShape);
  out.resize(n);
  std::vector<std::size_t> idx(sliceShape.size(), 0);
  for (std::size_t i = 0; i < n; ++i) {
    std::size_t src = 0;
    for (std::size_t d = 0; d < sliceShape.size(); ++d) src += ((starts[d] + idx[d]) % tShape[d]) * tStride[d];
    out[i] = src;
    for (std::size_t d = sliceShape.size(); d-- > 0;) {
      if (++idx[d] < sliceShape[d]) break;
      idx[d] = 0;
    }
  }
}

/// Per-dimension starts of a dynamic slice: offsets at or beyond the end
/// select 0 (popops' remapping of invalid offsets).
std::vector<std::size_t> dynamicStarts(const std::vector<double> &offsets, const std::vector<std::size_t> &tShape,
                                       const std::vector<std::size_t> &dims) {
  std::vector<std::size_t> starts(tShape.size(), 0);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const double o = offsets[i];
    starts[dims[i]] = (o < 0 || o >= static_cast<double>(tShape[dims[i]])) ? 0 : static_cast<std::size_t>(o);
  }
  return starts;
}

/// Starts of multi-slice m, or false when the slice does not fit in t.
bool multiStarts(const std::vector<double> &offsets, std::size_t m, const std::vector<std::size_t> &tShape,
                 const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                 std::vector<std::size_t> &starts) {
  starts.assign(tShape.size(), 0);
  for (std::size_t i = 0; i < dims.size(); ++i) {
    const double o = offsets[m * dims.size() + i];
    if (o < 0 || o + static_cast<double>(sizes[i]) > static_cast<double>(tShape[dims[i]])) return false;
    starts[dims[i]] = static_cast<std::size_t>(o);
  }
  return true;
}

std::size_t numOffsetsOf(const char *op, const poplar::Tensor &offsets, std::size_t numDims) {
  checkOffsetType(op, offsets);
  const auto shape = offsets.shape();
  if (shape.size() == 2 && shape[1] == numDims) return shape[0];
  if (shape.size() == 1 && numDims == 1) return shape[0];
  throw poputil::poplibs_error(message(op, ": offsets must have shape [numOffsets, ", numDims, "], got ",
                                       shapeString(shape)));
}

} // namespace

poplar::Tensor createSliceableTensor(poplar::Graph &graph, const poplar::Type &type,
                                     const std::vector<std::size_t> &shape, const std::vector<std::size_t> &,
                                     const std::vector<std::size_t> &, std::size_t,
                                     const poplar::DebugContext &debugContext) {
  return poplar_host::newMappedVariable(graph, type, shape, nameOf(debugContext, "sliceable"));
}

poplar::Tensor createSliceableTensor(poplar::Graph &graph, const poplar::Type &type,
                                     const std::vector<std::size_t> &shape, const std::vector<std::size_t> &dims,
                                     const std::vector<std::size_t> &sizes, const SlicePlan &, const poplar::OptionFlags &,
                                     const poplar::DebugContext &debugContext) {
  return createSliceableTensor(graph, type, shape, dims, sizes, 0, debugContext);
}

poplar::Tensor createSliceTensor(poplar::Graph &graph, const poplar::Tensor &t, const std::vector<std::size_t> &dims,
                                 const std::vector<std::size_t> &sizes, std::size_t numIndices,
                                 const poplar::DebugContext &debugContext) {
  checkSliceArgs("createSliceTensor", t, dims, sizes);
  auto shape = slicedShape(t, dims, sizes);
  shape.insert(shape.begin(), numIndices);
  return poplar_host::newMappedVariable(graph, t.elementType(), shape, nameOf(debugContext, "slice"));
}

poplar::Tensor createSliceTensor(poplar::Graph &graph, const poplar::Type &type, const std::vector<std::size_t> &shape,
                                 const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                                 std::size_t numIndices, const SlicePlan &, const poplar::OptionFlags &,
                                 const poplar::DebugContext &debugContext) {
  auto s = shape;
  for (std::size_t i = 0; i < dims.size() && i < sizes.size(); ++i)
    if (dims[i] < s.size()) s[dims[i]] = sizes[i];
  s.insert(s.begin(), numIndices);
  return poplar_host::newMappedVariable(graph, type, s, nameOf(debugContext, "slice"));
}

poplar::Tensor createIndicesTensor(poplar::Graph &graph, const std::vector<std::size_t> &dims, std::size_t numIndices,
                                   const SlicePlan &, const poplar::OptionFlags &,
                                   const poplar::DebugContext &debugContext) {
  return poplar_host::newMappedVariable(graph, poplar::UNSIGNED_INT, {numIndices, dims.size()},
                                        nameOf(debugContext, "indices"));
}

void dynamicSliceWithOutput(poplar::Graph &, const poplar::Tensor &output, const poplar::Tensor &t,
                            const poplar::Tensor &offset, const std::vector<std::size_t> &dims,
                            const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog,
                            const poplar::DebugContext &debugContext) {
  checkSliceArgs("dynamicSlice", t, dims, sizes);
  checkOffsetType("dynamicSlice", offset);
  if (offset.numElements() != dims.size())
    throw poputil::poplibs_error(message("dynamicSlice: ", offset.numElements(), " offsets for ", dims.size(),
                                         " dims"));
  const auto outShape = slicedShape(t, dims, sizes);
  if (output.shape() != outShape || output.elementType() != t.elementType())
    throw poputil::poplibs_error(message("dynamicSlice: output ", output.elementType(), output.shapeToString(),
                                         " should be ", t.elementType(), shapeString(outShape)));
  const auto tShape = t.shape();
  const std::size_t es = t.elementType().size();
  poplar_host::addHostStep(prog, nameOf(debugContext, "dynamicSlice"), [=](ReplicaContext &ctx) {
    const auto src = ctx.readBytes(t);
    const auto starts = dynamicStarts(ctx.read(offset), tShape, dims);
    std::vector<std::size_t> idx;
    sliceIndices(tShape, outShape, starts, idx);
    std::vector<std::uint8_t> out(idx.size() * es);
    for (std::size_t i = 0; i < idx.size(); ++i) std::memcpy(out.data() + i * es, src.data() + idx[i] * es, es);
    ctx.writeBytes(output, out.data());
  }, {output, t, offset});
}

poplar::Tensor dynamicSlice(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &offset,
                            const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                            poplar::program::Sequence &prog, const poplar::DebugContext &debugContext) {
  checkSliceArgs("dynamicSlice", t, dims, sizes);
  auto out = poplar_host::newMappedVariable(graph, t.elementType(), slicedShape(t, dims, sizes),
                                            nameOf(debugContext, "dynamicSlice"));
  dynamicSliceWithOutput(graph, out, t, offset, dims, sizes, prog, debugContext);
  return out;
}

void dynamicUpdate(poplar::Graph &, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offset,
                   const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                   poplar::program::Sequence &prog, const poplar::DebugContext &debugContext) {
  checkSliceArgs("dynamicUpdate", t, dims, sizes);
  checkOffsetType("dynamicUpdate", offset);
  if (offset.numElements() != dims.size())
    throw poputil::poplibs_error(message("dynamicUpdate: ", offset.numElements(), " offsets for ", dims.size(),
                                         " dims"));
  const auto sShape = slicedShape(t, dims, sizes);
  if (s.shape() != sShape || s.elementType() != t.elementType())
    throw poputil::poplibs_error(message("dynamicUpdate: the update ", s.elementType(), s.shapeToString(),
                                         " should be ", t.elementType(), shapeString(sShape)));
  if (t.containsConstant()) throw poputil::poplibs_error("dynamicUpdate: the tensor contains a constant");
  const auto tShape = t.shape();
  const std::size_t es = t.elementType().size();
  poplar_host::addHostStep(prog, nameOf(debugContext, "dynamicUpdate"), [=](ReplicaContext &ctx) {
    auto dst = ctx.readBytes(t);
    const auto upd = ctx.readBytes(s);
    const auto starts = dynamicStarts(ctx.read(offset), tShape, dims);
    std::vector<std::size_t> idx;
    sliceIndices(tShape, sShape, starts, idx);
    for (std::size_t i = 0; i < idx.size(); ++i) std::memcpy(dst.data() + idx[i] * es, upd.data() + i * es, es);
    ctx.writeBytes(t, dst.data());
  }, {t, s, offset});
}

poplar::Tensor multiSlice(poplar::Graph &graph, const poplar::Tensor &t, const poplar::Tensor &offsets,
                          const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                          poplar::program::Sequence &prog, const SlicePlan &, const poplar::OptionFlags &,
                          const poplar::DebugContext &debugContext) {
  checkSliceArgs("multiSlice", t, dims, sizes);
  const std::size_t m = numOffsetsOf("multiSlice", offsets, dims.size());
  const auto sliceShape = slicedShape(t, dims, sizes);
  auto outShape = sliceShape;
  outShape.insert(outShape.begin(), m);
  auto out = poplar_host::newMappedVariable(graph, t.elementType(), outShape, nameOf(debugContext, "multiSlice"));
  const auto tShape = t.shape();
  const std::size_t es = t.elementType().size(), sliceN = poplar_host::product(sliceShape);
  poplar_host::addHostStep(prog, nameOf(debugContext, "multiSlice"), [=](ReplicaContext &ctx) {
    const auto src = ctx.readBytes(t);
    const auto offs = ctx.read(offsets);
    std::vector<std::uint8_t> result(m * sliceN * es, 0);
    std::vector<std::size_t> starts, idx;
    for (std::size_t k = 0; k < m; ++k) {
      if (!multiStarts(offs, k, tShape, dims, sizes, starts)) continue; // stays zero
      sliceIndices(tShape, sliceShape, starts, idx);
      for (std::size_t i = 0; i < sliceN; ++i)
        std::memcpy(result.data() + (k * sliceN + i) * es, src.data() + idx[i] * es, es);
    }
    ctx.writeBytes(out, result.data());
  }, {t, offsets, out});
  return out;
}

namespace {
enum class UpdateKind { Set, Add, Max };

void multiUpdateImpl(const char *op, UpdateKind kind, const poplar::Tensor &t, const poplar::Tensor &s,
                     const poplar::Tensor &offsets, const poplar::Tensor *scale, const std::vector<std::size_t> &dims,
                     const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog, const std::string &name) {
  checkSliceArgs(op, t, dims, sizes);
  const std::size_t m = numOffsetsOf(op, offsets, dims.size());
  const auto sliceShape = slicedShape(t, dims, sizes);
  auto sShape = sliceShape;
  sShape.insert(sShape.begin(), m);
  if (s.shape() != sShape || s.elementType() != t.elementType())
    throw poputil::poplibs_error(message(op, ": the slices ", s.elementType(), s.shapeToString(), " should be ",
                                         t.elementType(), shapeString(sShape)));
  if (t.containsConstant()) throw poputil::poplibs_error(message(op, ": the tensor contains a constant"));
  // the adding vertices are built for half, float, int and unsigned only
  if (kind == UpdateKind::Add && t.elementType().size() < 4 && t.elementType() != poplar::HALF)
    throw poputil::poplibs_error(message(op, ": no vertices for ", t.elementType(), " in PopLibs"));
  if (scale && scale->numElements() != 1) throw poputil::poplibs_error(message(op, ": the scale must be one element"));
  const auto tShape = t.shape();
  const std::size_t sliceN = poplar_host::product(sliceShape);
  const poplar::Tensor scaleT = scale ? *scale : poplar::Tensor();
  const poplar::Type type = t.elementType();
  // additions round to the tensor's type one update at a time, in offset order
  poplar_host::addHostStep(prog, name, [=](ReplicaContext &ctx) {
    auto dst = ctx.read(t);
    const auto upd = ctx.read(s);
    const auto offs = ctx.read(offsets);
    const double k = scaleT.valid() ? ctx.read(scaleT)[0] : 1.0;
    poplar_host::Rounder r = ctx.rounder(t);
    std::vector<std::size_t> starts, idx;
    for (std::size_t j = 0; j < m; ++j) {
      if (!multiStarts(offs, j, tShape, dims, sizes, starts)) continue; // ignored, as in popops
      sliceIndices(tShape, sliceShape, starts, idx);
      for (std::size_t i = 0; i < sliceN; ++i) {
        double &d = dst[idx[i]];
        const double u = upd[j * sliceN + i];
        if (kind == UpdateKind::Set) d = u;
        else if (kind == UpdateKind::Add) {
          if (type == poplar::FLOAT) d = static_cast<float>(d) + static_cast<float>(k) * static_cast<float>(u);
          else if (type == poplar::HALF) d = r.toHalf(d + static_cast<double>(static_cast<float>(k)) * u, idx[i], j);
          else d += k * u;
        } else d = std::max(d, u);
      }
    }
    ctx.raised(r);
    ctx.write(t, dst);
  }, {t, s, offsets, scaleT});
}
} // namespace

void multiUpdate(poplar::Graph &, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offsets,
                 const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                 poplar::program::Sequence &prog, const SlicePlan &, const poplar::OptionFlags &,
                 const poplar::DebugContext &debugContext) {
  multiUpdateImpl("multiUpdate", UpdateKind::Set, t, s, offsets, nullptr, dims, sizes, prog,
                  nameOf(debugContext, "multiUpdate"));
}

void multiUpdateAdd(poplar::Graph &, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offsets,
                    const poplar::Tensor &scale, const std::vector<std::size_t> &dims,
                    const std::vector<std::size_t> &sizes, poplar::program::Sequence &prog, const SlicePlan &,
                    const poplar::OptionFlags &, const poplar::DebugContext &debugContext) {
  // PopLibs' multiUpdateAdd takes a 2-D tensor (rows updated along dimension 0) and no other
  if (t.rank() != 2)
    throw poputil::poplibs_error(message("multiUpdateAdd: the tensor must have rank 2, got ", t.shapeToString()));
  multiUpdateImpl("multiUpdateAdd", UpdateKind::Add, t, s, offsets, &scale, dims, sizes, prog,
                  nameOf(debugContext, "multiUpdateAdd"));
}

void multiUpdateMax(poplar::Graph &, const poplar::Tensor &t, const poplar::Tensor &s, const poplar::Tensor &offsets,
                    const std::vector<std::size_t> &dims, const std::vector<std::size_t> &sizes,
                    poplar::program::Sequence &prog, const SlicePlan &, const poplar::OptionFlags &,
                    const poplar::DebugContext &debugContext) {
  multiUpdateImpl("multiUpdateMax", UpdateKind::Max, t, s, offsets, nullptr, dims, sizes, prog,
                  nameOf(debugContext, "multiUpdateMax"));
}

namespace embedding {
/// The plan's options are checked as PopLibs checks them; the emulation slices the same way
/// whatever the plan (it has no tile memory to trade against cycles).
SlicePlan plan(const poplar::Graph &, const poplar::Type &, const std::size_t, const std::size_t,
               const std::vector<std::size_t> &, const poplar::OptionFlags &options) {
  auto boolean = [&](const char *key) {
    const auto v = options.get(key, "true");
    if (v != "true" && v != "false")
      throw poplar::invalid_option(message("embedding::plan: invalid value '", v, "' for option ", key, " (true or false)"));
    return v == "true";
  };
  if (!boolean("usedForSlice") && !boolean("usedForUpdate"))
    throw poplar::invalid_option("embedding::plan: usedForSlice and usedForUpdate are both false");
  const auto op = options.get("operationForUpdate", "add");
  if (op != "none" && op != "add" && op != "max" && op != "mul")
    throw poplar::invalid_option(message("embedding::plan: invalid value '", op, "' for option operationForUpdate (none, add, max or mul)"));
  poplar_host::checkMemoryProportion(options, "embedding::plan");
  return SlicePlan();
}
} // namespace embedding

} // namespace popops
