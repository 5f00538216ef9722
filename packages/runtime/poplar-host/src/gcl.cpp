// gcl: collectives across replicas. Each call adds a Collective node; when it
// runs, every replica contributes its copy, waits for the others, and writes
// its share of the result (see the engine's barrier).
#include "internal.hpp"

#include <gcl/Collectives.hpp>
#include <poputil/exceptions.hpp>

#include <algorithm>
#include <cmath>

using poplar_host::message;

namespace gcl {

std::ostream &operator<<(std::ostream &os, const CollectiveOperator &op) {
  static const char *names[] = {"ADD", "MEAN", "MUL", "MIN", "MAX", "LOGICAL_AND", "LOGICAL_OR", "SQUARE_ADD", "LOCAL"};
  return os << names[static_cast<int>(op)];
}

namespace {

using Contributions = std::vector<const std::vector<double> *>;

/// The replicas of each group, by PopART's rule: (stride, size) is (1, N)
/// for ALL, (1, k) for CONSECUTIVE and (N/k, k) for ORTHOGONAL; the i-th
/// replica of group g is floor(g/s)*s*k + g%s + i*s.
std::vector<std::vector<unsigned>> replicaGroups(const CommGroup &group, unsigned N) {
  if (group.replicaGroupStride != 1)
    throw poputil::poplibs_error("CommGroup: a replicaGroupStride other than 1 is not emulated");
  unsigned k = group.replicaGroupSize == 0 || group.type == CommGroupType::ALL ? N : group.replicaGroupSize;
  if (k > N || N % k != 0)
    throw poputil::poplibs_error(message("CommGroup: a group size of ", k, " does not divide ", N, " replicas"));
  const unsigned s = group.type == CommGroupType::ORTHOGONAL ? N / k : 1;
  std::vector<std::vector<unsigned>> groups(N / k);
  for (unsigned g = 0; g < N / k; ++g)
    for (unsigned i = 0; i < k; ++i) groups[g].push_back((g / s) * (s * k) + g % s + i * s);
  return groups;
}

/// x as an element of `type` holds it: the IPU combines contributions in the
/// tensor's own type, so every partial result is rounded (float, half) or
/// wrapped (int, unsigned int) to it.
double inType(const poplar::Type &type, double x) {
  if (type == poplar::FLOAT) return static_cast<double>(static_cast<float>(x));
  if (type == poplar::HALF) return static_cast<double>(poplar_host::halfBitsToFloat(poplar_host::doubleToHalfBits(x)));
  return x;
}

/// The combination of one element of a group's contributions, in `type`, in
/// replica order within the group.
double combineElement(CollectiveOperator op, const poplar::Type &type, const Contributions &c, std::size_t e) {
  const bool integral = type == poplar::INT || type == poplar::UNSIGNED_INT;
  if (integral && (op == CollectiveOperator::ADD || op == CollectiveOperator::MEAN || op == CollectiveOperator::MUL ||
                   op == CollectiveOperator::SQUARE_ADD)) {
    // two's-complement arithmetic, wrapping as the IPU's 32-bit integers do
    auto bits = [&](double v) { return static_cast<std::uint32_t>(static_cast<std::int64_t>(v)); };
    std::uint32_t a = bits((*c[0])[e]);
    if (op == CollectiveOperator::SQUARE_ADD) a *= a;
    for (std::size_t m = 1; m < c.size(); ++m) {
      const std::uint32_t v = bits((*c[m])[e]);
      a = op == CollectiveOperator::MUL ? a * v : op == CollectiveOperator::SQUARE_ADD ? a + v * v : a + v;
    }
    if (type == poplar::INT) {
      std::int64_t s = static_cast<std::int32_t>(a);
      if (op == CollectiveOperator::MEAN) s /= static_cast<std::int64_t>(c.size()); // truncating, as C++'s int division
      return static_cast<double>(s);
    }
    if (op == CollectiveOperator::MEAN) a /= static_cast<std::uint32_t>(c.size());
    return static_cast<double>(a);
  }
  const double first = (*c[0])[e];
  double a = op == CollectiveOperator::SQUARE_ADD ? inType(type, first * first) : first;
  for (std::size_t m = 1; m < c.size(); ++m) {
    const double v = (*c[m])[e];
    switch (op) {
    case CollectiveOperator::ADD:
    case CollectiveOperator::MEAN: a = inType(type, a + v); break;
    case CollectiveOperator::SQUARE_ADD: a = inType(type, a + inType(type, v * v)); break;
    case CollectiveOperator::MUL: a = inType(type, a * v); break;
    case CollectiveOperator::MIN: a = std::fmin(a, v); break;
    case CollectiveOperator::MAX: a = std::fmax(a, v); break;
    case CollectiveOperator::LOGICAL_AND: a = (a != 0 && v != 0) ? 1 : 0; break;
    case CollectiveOperator::LOGICAL_OR: a = (a != 0 || v != 0) ? 1 : 0; break;
    case CollectiveOperator::LOCAL: break;
    }
  }
  // the sum in the tensor's type, then divided by the group's size (rounded once more)
  if (op == CollectiveOperator::MEAN) a = inType(type, a / static_cast<double>(c.size()));
  return a;
}

std::vector<double> reduceGroup(CollectiveOperator op, const poplar::Type &type, const Contributions &c, unsigned rank) {
  if (op == CollectiveOperator::LOCAL) return *c[rank];
  std::vector<double> r(c[0]->size());
  for (std::size_t e = 0; e < r.size(); ++e) r[e] = combineElement(op, type, c, e);
  return r;
}

void checkOperatorType(CollectiveOperator op, const poplar::Tensor &data) {
  const bool logical = op == CollectiveOperator::LOGICAL_AND || op == CollectiveOperator::LOGICAL_OR;
  if (logical != (data.elementType() == poplar::BOOL) && op != CollectiveOperator::LOCAL)
    throw poputil::poplibs_error(message("collective ", op, " on a ", data.elementType(), " tensor"));
}

void addCollective(poplar::program::Sequence &prog, const poplar::Tensor &src, const poplar::Tensor &dst,
                   std::vector<std::vector<unsigned>> groups,
                   std::function<std::vector<double>(const Contributions &, unsigned)> combine) {
  auto n = poplar_host::makeNode(poplar_host::ProgramNode::Kind::Collective);
  n->src = src;
  n->dst = dst;
  n->groups = std::move(groups);
  n->combine = std::move(combine);
  prog.add(poplar::program::Program(n));
}

std::string nameOf(const poplar::DebugContext &dc, const char *op) {
  return dc.getPathName().empty() ? std::string(op) : dc.getPathName() + "/" + op;
}

} // namespace

void allReduceInPlaceCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                  poplar::program::Sequence &prog, const CommGroup &group,
                                  const poplar::DebugContext &, const poplar::OptionFlags &) {
  checkOperatorType(op, data);
  if (data.containsConstant()) throw poputil::poplibs_error("allReduceInPlaceCrossReplica: the data is a constant");
  addCollective(prog, data, data, replicaGroups(group, graph.getReplicationFactor()),
                [op, type = data.elementType()](const Contributions &c, unsigned rank) { return reduceGroup(op, type, c, rank); });
}

void allReduceInPlaceCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                  poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                                  const poplar::OptionFlags &options) {
  allReduceInPlaceCrossReplica(graph, data, op, prog, CommGroup(), debugContext, options);
}

void allReduceInPlaceCrossReplica(poplar::Graph &graph, std::vector<poplar::Tensor> &datas, CollectiveOperator op,
                                  poplar::program::Sequence &prog, const CommGroup &group,
                                  const poplar::DebugContext &debugContext, const poplar::OptionFlags &options) {
  if (datas.empty()) return;
  std::vector<poplar::Tensor> flat;
  for (const auto &d : datas) flat.push_back(d.flatten());
  allReduceInPlaceCrossReplica(graph, poplar::concat(flat), op, prog, group, debugContext, options);
}

poplar::Tensor allReduceCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                     poplar::program::Sequence &prog, const CommGroup &group,
                                     const poplar::DebugContext &debugContext, const poplar::OptionFlags &) {
  checkOperatorType(op, data);
  auto out = graph.clone(data, nameOf(debugContext, "allReduce"));
  addCollective(prog, data, out, replicaGroups(group, graph.getReplicationFactor()),
                [op, type = data.elementType()](const Contributions &c, unsigned rank) { return reduceGroup(op, type, c, rank); });
  return out;
}

poplar::Tensor allReduceCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                     poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                                     const poplar::OptionFlags &options) {
  return allReduceCrossReplica(graph, data, op, prog, CommGroup(), debugContext, options);
}

namespace {

/// The flattened data's element intervals on each IPU of one replica, in
/// tensor order. PopLibs documents that a replica spanning several IPUs
/// reduce-scatters each IPU's elements separately.
std::vector<std::vector<poplar::Interval>> intervalsPerIpu(poplar::Graph &graph, const poplar::Tensor &flat) {
  auto top = graph.getTopLevelGraph();
  const unsigned ipus = top.getTarget().getNumIPUs(), tilesPerIpu = top.getTarget().getTilesPerIPU();
  std::vector<std::vector<poplar::Interval>> out(ipus);
  if (ipus == 1) {
    out[0].emplace_back(0, flat.numElements());
    return out;
  }
  const auto mapping = top.getTileMapping(flat);
  for (std::size_t tile = 0; tile < mapping.size(); ++tile)
    for (const auto &iv : mapping[tile]) out[tile / tilesPerIpu].push_back(iv);
  for (auto &ivs : out)
    std::sort(ivs.begin(), ivs.end(), [](const poplar::Interval &a, const poplar::Interval &b) {
      return a.begin() < b.begin();
    });
  return out;
}

} // namespace

poplar::Tensor reduceScatterCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                         poplar::program::Sequence &prog, const CommGroup &group,
                                         const poplar::DebugContext &debugContext, const poplar::OptionFlags &) {
  checkOperatorType(op, data);
  if (data.rank() != 1)
    throw poputil::poplibs_error(message("reduceScatterCrossReplica: the data must be a rank-1 tensor, got shape ",
                                         poplar_host::shapeString(data.shape()),
                                         " (flatten it first, as PopART does)"));
  auto groups = replicaGroups(group, graph.getReplicationFactor());
  const std::size_t k = groups[0].size();
  // Per IPU: its elements (gathered into `src`, IPU by IPU) and its shard.
  std::vector<poplar::Tensor> srcParts, outParts;
  std::vector<std::size_t> sizes, chunks;
  const auto perIpu = intervalsPerIpu(graph, data);
  for (unsigned ipu = 0; ipu < perIpu.size(); ++ipu) {
    std::size_t n = 0;
    for (const auto &iv : perIpu[ipu]) {
      srcParts.push_back(data.slice(iv.begin(), iv.end()));
      n += iv.size();
    }
    if (n == 0) continue;
    const std::size_t chunk = (n + k - 1) / k;
    sizes.push_back(n);
    chunks.push_back(chunk);
    const std::string name = nameOf(debugContext, "reduceScatter");
    if (perIpu.size() == 1) {
      outParts.push_back(poplar_host::newMappedVariable(graph, data.elementType(), {chunk}, name));
    } else {
      const unsigned tilesPerIpu = graph.getTopLevelGraph().getTarget().getTilesPerIPU();
      auto ipuGraph = graph.getTopLevelGraph().createVirtualGraph(ipu * tilesPerIpu, (ipu + 1) * tilesPerIpu);
      outParts.push_back(poplar_host::newMappedVariable(ipuGraph, data.elementType(), {chunk}, name));
    }
  }
  if (outParts.empty()) throw poputil::poplibs_error("reduceScatterCrossReplica: the data has no elements");
  addCollective(prog, poplar::concat(srcParts), poplar::concat(outParts), std::move(groups),
                [op, type = data.elementType(), sizes, chunks](const Contributions &c, unsigned rank) {
                  const auto all = reduceGroup(op, type, c, rank);
                  std::vector<double> mine;
                  for (std::size_t p = 0, at = 0; p < sizes.size(); at += sizes[p], ++p)
                    for (std::size_t i = rank * chunks[p]; i < (rank + 1) * chunks[p]; ++i)
                      mine.push_back(i < sizes[p] ? all[at + i] : 0.0); // zero padding
                  return mine;
                });
  return poplar::concat(outParts);
}

poplar::Tensor reduceScatterCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, CollectiveOperator op,
                                         poplar::program::Sequence &prog, const poplar::DebugContext &debugContext,
                                         const poplar::OptionFlags &options) {
  return reduceScatterCrossReplica(graph, data, op, prog, CommGroup(), debugContext, options);
}

std::vector<poplar::Tensor> reduceScatterCrossReplica(poplar::Graph &graph, const std::vector<poplar::Tensor> &datas,
                                                      CollectiveOperator op, poplar::program::Sequence &prog,
                                                      const CommGroup &group, const poplar::DebugContext &debugContext,
                                                      const poplar::OptionFlags &options) {
  std::vector<poplar::Tensor> out;
  for (const auto &d : datas) out.push_back(reduceScatterCrossReplica(graph, d, op, prog, group, debugContext, options));
  return out;
}

poplar::Tensor allGatherCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, poplar::program::Sequence &prog,
                                     const CommGroup &group, const poplar::DebugContext &debugContext,
                                     const poplar::OptionFlags &) {
  poplar_host::impl(data, "allGatherCrossReplica data");
  auto groups = replicaGroups(group, graph.getReplicationFactor());
  auto shape = data.shape();
  shape.insert(shape.begin(), groups[0].size());
  auto out = poplar_host::newMappedVariable(graph, data.elementType(), shape, nameOf(debugContext, "allGather"));
  addCollective(prog, data, out, std::move(groups), [](const Contributions &c, unsigned) {
    std::vector<double> all;
    for (const auto *v : c) all.insert(all.end(), v->begin(), v->end());
    return all;
  });
  return out;
}

poplar::Tensor allGatherCrossReplica(poplar::Graph &graph, const poplar::Tensor &data, poplar::program::Sequence &prog,
                                     const poplar::DebugContext &debugContext, const poplar::OptionFlags &options) {
  return allGatherCrossReplica(graph, data, prog, CommGroup(), debugContext, options);
}

std::vector<poplar::Tensor> allGatherCrossReplica(poplar::Graph &graph, const std::vector<poplar::Tensor> &datas,
                                                  poplar::program::Sequence &prog, const CommGroup &group,
                                                  const poplar::DebugContext &debugContext,
                                                  const poplar::OptionFlags &options) {
  std::vector<poplar::Tensor> out;
  for (const auto &d : datas) out.push_back(allGatherCrossReplica(graph, d, prog, group, debugContext, options));
  return out;
}

} // namespace gcl
