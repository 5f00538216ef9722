// A graph replicated 4 times: per-replica host access (replica-major
// buffers), collectives over ALL / CONSECUTIVE / ORTHOGONAL groups following
// PopART's grouping rule, replica-major streams, BROADCAST streams, and an
// error (not a hang) when replicas take different paths to a collective.
#include <gcl/Collectives.hpp>
#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poputil/TileMapping.hpp>
#include <poputil/exceptions.hpp>

#include "check.hpp"

using namespace poplar;
using namespace poplar::program;

int main() {
  const unsigned R = 4;
  auto dm = DeviceManager::createDeviceManager();
  Device device = dm.getDevices(TargetType::IPU, R).front();
  CHECK_EQ(device.getTarget().getNumIPUs(), R);
  Graph graph(device.getTarget(), replication_factor(R));
  CHECK_EQ(graph.getReplicationFactor(), R);
  CHECK_EQ(graph.getTarget().getNumIPUs(), 1u); // one replica's share

  Tensor w = graph.addVariable(FLOAT, {6}, "w");
  poputil::mapTensorLinearly(graph, w);
  graph.createHostWrite("w", w);
  graph.createHostRead("w-read", w);

  Sequence prog;
  auto read = [&](const std::string &name, const Tensor &t) { graph.createHostRead(name, t); };
  using gcl::CommGroup;
  using gcl::CommGroupType;
  using gcl::CollectiveOperator;
  read("sumAll", gcl::allReduceCrossReplica(graph, w, CollectiveOperator::ADD, prog, CommGroup(CommGroupType::ALL, 0)));
  read("meanCons", gcl::allReduceCrossReplica(graph, w, CollectiveOperator::MEAN, prog,
                                              CommGroup(CommGroupType::CONSECUTIVE, 2)));
  read("orth", gcl::allReduceCrossReplica(graph, w, CollectiveOperator::ADD, prog, {CommGroupType::ORTHOGONAL, 2}));
  read("scatter", gcl::reduceScatterCrossReplica(graph, w, CollectiveOperator::ADD, prog));
  read("gather", gcl::allGatherCrossReplica(graph, w, prog, CommGroup(CommGroupType::CONSECUTIVE, 2)));
  Tensor wMax = graph.clone(w, "wMax");
  prog.add(Copy(w, wMax));
  gcl::allReduceInPlaceCrossReplica(graph, wMax, CollectiveOperator::MAX, prog);
  read("max", wMax);

  // Streams: every copy carries the data of all replicas, replica 0 first.
  Tensor t = graph.addVariable(FLOAT, {3}, "t");
  Tensor u = graph.addVariable(FLOAT, {2}, "u");
  graph.setTileMapping(t, 1);
  graph.setTileMapping(u, 2);
  DataStream x = graph.addHostToDeviceFIFO("x", FLOAT, 3);
  DataStream y = graph.addDeviceToHostFIFO("y", FLOAT, 3);
  DataStream bcast = graph.addHostToDeviceFIFO("b", FLOAT, 2, ReplicatedStreamMode::BROADCAST);
  Sequence step({Copy(x, t)});
  gcl::allReduceInPlaceCrossReplica(graph, t, CollectiveOperator::ADD, step, CommGroup(CommGroupType::CONSECUTIVE, 2));
  step.add(Copy(t, y));
  Sequence streams({Repeat(2, step), Copy(bcast, u)});
  read("u", u);

  // Replica 0 alone reaches a collective.
  Tensor pred = graph.addVariable(BOOL, {}, "pred");
  graph.setTileMapping(pred, 3);
  graph.createHostWrite("pred", pred);
  Sequence reduceIt;
  gcl::allReduceInPlaceCrossReplica(graph, w, CollectiveOperator::ADD, reduceIt);
  Sequence diverge({If(pred, reduceIt, Sequence())});

  CHECK_THROWS(poputil::poplibs_error,
               gcl::allReduceCrossReplica(graph, w, CollectiveOperator::ADD, prog, CommGroup(CommGroupType::CONSECUTIVE, 3)),
               "does not divide");

  Engine engine(graph, {prog, streams, diverge});
  engine.load(device);

  // Replica r holds w = 10r + i.
  std::vector<float> hw(R * 6);
  for (unsigned r = 0; r < R; ++r)
    for (unsigned i = 0; i < 6; ++i) hw[r * 6 + i] = float(10 * r + i);
  engine.writeTensor("w", hw.data(), hw.data() + hw.size());
  CHECK_THROWS(poplar::poplar_error, engine.writeTensor("w", hw.data(), hw.data() + 6), "4 replica(s)");
  engine.run(0);

  auto readAll = [&](const std::string &name, std::size_t n) {
    std::vector<float> v(R * n);
    engine.readTensor(name, v.data(), v.data() + v.size());
    return v;
  };
  std::vector<float> sumAll, meanCons, orth, scatter, gather, mx;
  for (unsigned r = 0; r < R; ++r) {
    for (unsigned i = 0; i < 6; ++i) {
      sumAll.push_back(float(60 + 4 * i)); // 0+10+20+30 + 4i
      // CONSECUTIVE 2: {0,1} and {2,3}
      meanCons.push_back(float((r < 2 ? 5 : 25) + i));
      // ORTHOGONAL 2 (PopART: 4/2 = 2 apart): {0,2} and {1,3}
      orth.push_back(float((r % 2 == 0 ? 20 : 40) + 2 * i));
      mx.push_back(float(30 + i));
    }
    // The ADD over all replicas is 60+4i for i < 6, padded to 8; replica r gets chunk r.
    const float all[8] = {60, 64, 68, 72, 76, 80, 0, 0};
    scatter.push_back(all[2 * r]);
    scatter.push_back(all[2 * r + 1]);
    const unsigned first = r < 2 ? 0 : 2;
    for (unsigned m = first; m < first + 2; ++m)
      for (unsigned i = 0; i < 6; ++i) gather.push_back(float(10 * m + i));
  }
  CHECK_VEC(readAll("sumAll", 6), sumAll);
  CHECK_VEC(readAll("meanCons", 6), meanCons);
  CHECK_VEC(readAll("orth", 6), orth);
  CHECK_VEC(readAll("scatter", 2), scatter);
  CHECK_VEC(readAll("gather", 12), gather);
  CHECK_VEC(readAll("max", 6), mx);
  CHECK_VEC(readAll("w-read", 6), hw); // untouched

  // Streams: copy k of replica r carries 100k + 10r + j.
  std::vector<float> xs(2 * R * 3), ys(2 * R * 3, -1.f), bs = {7.f, 8.f};
  for (unsigned k = 0; k < 2; ++k)
    for (unsigned r = 0; r < R; ++r)
      for (unsigned j = 0; j < 3; ++j) xs[(k * R + r) * 3 + j] = float(100 * k + 10 * r + j);
  engine.connectStream("x", xs.data(), xs.data() + xs.size());
  engine.connectStream("y", ys.data(), ys.data() + ys.size());
  engine.connectStream("b", bs.data(), bs.data() + bs.size());
  CHECK_THROWS(poplar::stream_connection_error, engine.connectStream("x", xs.data(), xs.data() + 5),
               "not a whole number of copies");
  engine.run(1);
  std::vector<float> expectY;
  for (unsigned k = 0; k < 2; ++k)
    for (unsigned r = 0; r < R; ++r)
      for (unsigned j = 0; j < 3; ++j) expectY.push_back(float(200 * k + (r < 2 ? 10 : 50) + 2 * j));
  CHECK_VEC(ys, expectY);
  CHECK_VEC(readAll("u", 2), (std::vector<float>{7, 8, 7, 8, 7, 8, 7, 8}));

  std::vector<std::uint8_t> preds = {1, 0, 0, 0};
  engine.writeTensor("pred", preds.data(), preds.data() + preds.size());
  CHECK_THROWS(poplar::runtime_error, engine.run(2), "different paths");
  preds = {1, 1, 1, 1};
  engine.writeTensor("pred", preds.data(), preds.data() + preds.size());
  engine.run(2); // all replicas reduce: fine
  std::vector<float> summed(R * 6);
  for (unsigned r = 0; r < R; ++r)
    for (unsigned i = 0; i < 6; ++i) summed[r * 6 + i] = float(60 + 4 * i);
  CHECK_VEC(readAll("w-read", 6), summed);
  return check::finish("replication");
}
