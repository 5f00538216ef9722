// Collectives across processes: run alone (4 replicas in one process) and
// under mpirun (2 processes of 2 replicas, or 4 of 1), this program must write the
// same results, bit for bit; packages/runtime/src/poplar-host-mpi.test.ts
// compares them. Usage: collectives <results file> [exit-early]
//   exit-early: process 1 stops after the first run, so process 0's second
//   run waits for it at a collective and must fail after the timeout.
// Results: a line per handle and replica, "<name> <replica> <values>", floats
// as their bits in hex. Values that the processes write differently before the
// first run (the weights, a remote-buffer row) must read back as process 0's.
#include <gcl/Collectives.hpp>
#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poputil/TileMapping.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

using namespace poplar;
using namespace poplar::program;
using gcl::CollectiveOperator;
using gcl::CommGroup;
using gcl::CommGroupType;

namespace {

const unsigned N = 4; // replicas, over all processes

unsigned processId() {
  const char *p = std::getenv("TILEGRAPH_PROCESS_ID");
  return p ? static_cast<unsigned>(std::atoi(p)) : 0;
}

struct Results {
  std::ofstream out;
  void floats(const std::string &name, const std::vector<float> &v, std::size_t perReplica) {
    for (unsigned r = 0; r < v.size() / perReplica; ++r) {
      out << name << ' ' << r;
      for (std::size_t i = 0; i < perReplica; ++i) {
        std::uint32_t bits;
        std::memcpy(&bits, &v[r * perReplica + i], 4);
        char hex[16];
        std::snprintf(hex, sizeof hex, " %08x", bits);
        out << hex;
      }
      out << '\n';
    }
  }
  void ints(const std::string &name, const std::vector<int> &v, std::size_t perReplica) {
    for (unsigned r = 0; r < v.size() / perReplica; ++r) {
      out << name << ' ' << r;
      for (std::size_t i = 0; i < perReplica; ++i) out << ' ' << v[r * perReplica + i];
      out << '\n';
    }
  }
};

int run(const std::string &file, bool exitEarly) {
  auto dm = DeviceManager::createDeviceManager();
  Device device = dm.getDevices(TargetType::IPU, N).front();
  Graph graph(device.getTarget(), replication_factor(N));

  Tensor w = graph.addVariable(FLOAT, {4}, "w");
  poputil::mapTensorLinearly(graph, w);
  graph.createHostWrite("w", w);
  Tensor k = graph.addVariable(INT, {2}, "k");
  graph.setTileMapping(k, 1);
  graph.createHostWrite("k", k);
  Tensor weights = graph.addVariable(FLOAT, {3}, "weights");
  poputil::mapTensorLinearly(graph, weights);
  graph.createHostWrite("weightsIn", weights);
  graph.createHostRead("weights", weights);
  RemoteBuffer rb = graph.addRemoteBuffer("rb", FLOAT, 4, 2);

  Sequence prog;
  std::vector<std::pair<std::string, Tensor>> outputs;
  const std::pair<const char *, CommGroup> groups[] = {
      {"all", CommGroup(CommGroupType::ALL, 0)},
      {"consecutive2", CommGroup(CommGroupType::CONSECUTIVE, 2)}, // {0,1} {2,3}: within a process
      {"orthogonal2", CommGroup(CommGroupType::ORTHOGONAL, 2)},   // {0,2} {1,3}: across processes
  };
  for (const auto &g : groups)
    for (auto op : {CollectiveOperator::ADD, CollectiveOperator::MEAN}) {
      const std::string suffix = std::string(op == CollectiveOperator::ADD ? "add." : "mean.") + g.first;
      outputs.emplace_back("f." + suffix, gcl::allReduceCrossReplica(graph, w, op, prog, g.second));
      outputs.emplace_back("i." + suffix, gcl::allReduceCrossReplica(graph, k, op, prog, g.second));
    }
  outputs.emplace_back("f.max.all", gcl::allReduceCrossReplica(graph, w, CollectiveOperator::MAX, prog));
  outputs.emplace_back("f.scatter.all", gcl::reduceScatterCrossReplica(graph, w, CollectiveOperator::ADD, prog));
  outputs.emplace_back("f.scatter.orthogonal2", gcl::reduceScatterCrossReplica(graph, w, CollectiveOperator::ADD, prog,
                                                                              CommGroup(CommGroupType::ORTHOGONAL, 2)));
  outputs.emplace_back("f.gather.all", gcl::allGatherCrossReplica(graph, w, prog));
  outputs.emplace_back("i.gather.orthogonal2",
                       gcl::allGatherCrossReplica(graph, k, prog, CommGroup(CommGroupType::ORTHOGONAL, 2)));
  outputs.emplace_back("f.weightsum", gcl::allReduceCrossReplica(graph, weights, CollectiveOperator::ADD, prog));
  prog.add(Copy(w, rb)); // row 0; row 1 keeps what the host wrote
  for (const auto &o : outputs) graph.createHostRead(o.first, o.second);

  Engine engine(graph, prog);
  engine.load(device);

  const unsigned me = processId();
  // Differs between processes: after the first run every process must have process 0's.
  std::vector<float> weightsIn(N * 3), row1(4);
  for (unsigned i = 0; i < weightsIn.size(); ++i) weightsIn[i] = 0.25f * i + 1000.f * me;
  for (unsigned i = 0; i < 4; ++i) row1[i] = 7.f + i + 100.f * me;
  engine.writeTensor("weightsIn", weightsIn.data(), weightsIn.data() + weightsIn.size());
  for (unsigned r = 0; r < N; ++r) engine.copyToRemoteBuffer(row1.data(), "rb", 1, r);

  Results results;
  results.out.open(file);
  // Two runs with different inputs: the second starts from each process's own writes.
  for (int step = 0; step < 2; ++step) {
    if (step == 1 && exitEarly && me == 1) return 0;
    std::vector<float> wv(N * 4);
    std::vector<int> kv(N * 2);
    for (unsigned r = 0; r < N; ++r) {
      // 0.1 and 1e8 make the float sums depend on the order of addition
      const float vals[4] = {float(r + 1), 0.1f * float(r + 1), r == 1 ? 1e8f : r == 2 ? -1e8f : 1.f, -0.5f * float(r)};
      for (unsigned i = 0; i < 4; ++i) wv[r * 4 + i] = vals[i] * float(step + 1);
      kv[r * 2] = int(r + 1) * (step + 1);
      kv[r * 2 + 1] = -10 * int(r + 1) - step;
    }
    engine.writeTensor("w", wv.data(), wv.data() + wv.size());
    engine.writeTensor("k", kv.data(), kv.data() + kv.size());
    engine.run(0);
    const std::string tag = "run" + std::to_string(step) + ".";
    for (const auto &o : outputs) {
      const std::size_t n = o.second.numElements();
      if (o.first[0] == 'f') {
        std::vector<float> v(N * n);
        engine.readTensor(o.first, v.data(), v.data() + v.size());
        results.floats(tag + o.first, v, n);
      } else {
        std::vector<int> v(N * n);
        engine.readTensor(o.first, v.data(), v.data() + v.size());
        results.ints(tag + o.first, v, n);
      }
    }
    std::vector<float> wr(N * 3);
    engine.readTensor("weights", wr.data(), wr.data() + wr.size());
    results.floats(tag + "f.weights", wr, 3);
    for (unsigned row = 0; row < 2; ++row) {
      std::vector<float> rows(N * 4);
      for (unsigned r = 0; r < N; ++r) engine.copyFromRemoteBuffer("rb", rows.data() + r * 4, row, r);
      results.floats(tag + "f.remote.row" + std::to_string(row), rows, 4);
    }
  }
  results.out << "done\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2) {
    std::cerr << "usage: collectives <results file> [exit-early]\n";
    return 2;
  }
  try {
    return run(argv[1], argc > 2 && std::string(argv[2]) == "exit-early");
  } catch (const std::exception &e) {
    std::cerr << "process " << processId() << ": " << e.what() << "\n";
    return 1;
  }
}
