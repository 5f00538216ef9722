// Collectives sum in the tensor's own type, as the IPU does: in replica order
// within each group, every partial sum rounded to float (or half), not summed
// in double and rounded once. The data are chosen so that the two differ.
#include <gcl/Collectives.hpp>
#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/Target.hpp>
#include <poputil/TileMapping.hpp>

#include <cmath>
#include <cstdint>

#include "check.hpp"

using namespace poplar;
using namespace poplar::program;

int main() {
  const unsigned R = 4;
  auto dm = DeviceManager::createDeviceManager();
  Device device = dm.getDevices(TargetType::IPU, R).front();
  Graph graph(device.getTarget(), replication_factor(R));
  using gcl::CollectiveOperator;
  using gcl::CommGroup;
  using gcl::CommGroupType;

  Tensor w = graph.addVariable(FLOAT, {3}, "w");
  poputil::mapTensorLinearly(graph, w);
  graph.createHostWrite("w", w);
  Tensor h = graph.addVariable(HALF, {1}, "h");
  graph.setTileMapping(h, 0);
  graph.createHostWrite("h", h);

  Sequence prog;
  auto read = [&](const std::string &name, const Tensor &t) { graph.createHostRead(name, t); };
  read("sum", gcl::allReduceCrossReplica(graph, w, CollectiveOperator::ADD, prog, CommGroup(CommGroupType::ALL, 0)));
  read("mean", gcl::allReduceCrossReplica(graph, w, CollectiveOperator::MEAN, prog, CommGroup(CommGroupType::ALL, 0)));
  // ORTHOGONAL 2: groups {0, 2} and {1, 3}
  read("orth", gcl::allReduceCrossReplica(graph, w, CollectiveOperator::ADD, prog, {CommGroupType::ORTHOGONAL, 2}));
  read("scatter", gcl::reduceScatterCrossReplica(graph, w, CollectiveOperator::ADD, prog));
  read("half", gcl::allReduceCrossReplica(graph, h, CollectiveOperator::ADD, prog));
  Tensor inPlace = graph.clone(w, "inPlace");
  prog.add(Copy(w, inPlace));
  gcl::allReduceInPlaceCrossReplica(graph, inPlace, CollectiveOperator::ADD, prog);
  read("inPlace", inPlace);

  Engine engine(graph, prog);
  engine.load(device);

  // element 0: 1 and three times 2^-24 (each added to 1 rounds back to 1 in float;
  //   in double the sum is 1 + 3·2^-24, which rounds to 1 + 2^-22)
  // element 1: 1e8, 1, -1e8, 1 (float: 1e8 + 1 = 1e8, so the sum is 1; double: 2)
  // element 2: 0.1 four times
  const float tiny = std::ldexp(1.f, -24);
  const std::vector<float> hw = {1.f, 1e8f, 0.1f, tiny, 1.f, 0.1f, tiny, -1e8f, 0.1f, tiny, 1.f, 0.1f};
  engine.writeTensor("w", hw.data(), hw.data() + hw.size());
  // half: 1 and three times 2^-11 (half: 1 each time; double: 1 + 3·2^-11 → 1 + 2^-9)
  std::vector<float> hf = {1.f, std::ldexp(1.f, -11), std::ldexp(1.f, -11), std::ldexp(1.f, -11)};
  std::vector<std::uint16_t> hbits(R);
  copyFloatToDeviceHalf(graph.getTarget(), hf.data(), hbits.data(), R);
  engine.writeTensor("h", hbits.data(), hbits.data() + hbits.size());
  engine.run(0);

  auto readAll = [&](const std::string &name, std::size_t n) {
    std::vector<float> v(R * n);
    engine.readTensor(name, v.data(), v.data() + v.size());
    return v;
  };
  // the float sums, partial sum by partial sum, in replica order
  auto floatSum = [&](std::initializer_list<unsigned> replicas, unsigned i) {
    float a = 0.f;
    bool first = true;
    for (unsigned r : replicas) {
      a = first ? hw[r * 3 + i] : a + hw[r * 3 + i];
      first = false;
    }
    return a;
  };
  const float sum0 = floatSum({0, 1, 2, 3}, 0), sum1 = floatSum({0, 1, 2, 3}, 1), sum2 = floatSum({0, 1, 2, 3}, 2);
  CHECK_EQ(sum0, 1.f);
  CHECK_EQ(sum1, 1.f);
  // what a double accumulation would give: different for elements 0 and 1
  CHECK(float(1.0 + 3.0 * std::ldexp(1.0, -24)) != sum0);
  CHECK(float(1e8 + 1.0 - 1e8 + 1.0) != sum1);
  std::vector<float> sum, mean, orth, summedInPlace;
  for (unsigned r = 0; r < R; ++r) {
    for (float s : {sum0, sum1, sum2}) {
      sum.push_back(s);
      summedInPlace.push_back(s);
      mean.push_back(s / 4.f);
    }
    for (unsigned i = 0; i < 3; ++i) orth.push_back(r % 2 == 0 ? floatSum({0, 2}, i) : floatSum({1, 3}, i));
  }
  CHECK_VEC(readAll("sum", 3), sum);
  CHECK_VEC(readAll("mean", 3), mean);
  CHECK_VEC(readAll("orth", 3), orth);
  CHECK_VEC(readAll("inPlace", 3), summedInPlace);
  // 3 elements over 4 replicas: one each, the last replica's padding
  CHECK_VEC(readAll("scatter", 1), (std::vector<float>{sum0, sum1, sum2, 0.f}));

  std::vector<std::uint16_t> hout(R);
  engine.readTensor("half", hout.data(), hout.data() + hout.size());
  std::vector<float> hsum(R);
  copyDeviceHalfToFloat(graph.getTarget(), hout.data(), hsum.data(), R);
  CHECK_VEC(hsum, (std::vector<float>(R, 1.f)));
  return check::finish("collective_sums");
}
