// IPUs on threads: the one-IPU children of a Sequence run one thread per IPU
// and multi-IPU programs (inter-IPU copies) synchronise them. The results
// match the sequential order; a failing vertex on one IPU is reported as the
// sequential run would report it, without hanging; prints keep their order;
// a stream or remote buffer used by two IPUs keeps the order of its copies;
// and a handshake between two IPUs' vertices shows that they really run at
// the same time, also in every replica and with a PopLibs call on one IPU
// between them (POPLAR_HOST_IPU_THREADS=0 turns the threads off, so the
// handshake then fails).
// codelets: codelets/ipu_threads.cpp
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/exceptions.hpp>
#include <popops/Cast.hpp>
#include <popops/Zero.hpp>

#include "check.hpp"

#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>
#include <vector>

using namespace poplar;
using namespace poplar::program;

namespace {

const unsigned kTilesPerIpu = 4;

Device makeDevice(unsigned ipus) {
  IPUModel model;
  model.numIPUs = ipus;
  model.tilesPerIPU = kTilesPerIpu;
  return model.createDevice();
}

std::vector<Graph> perIpu(Graph &graph) {
  std::vector<Graph> ipus;
  for (unsigned i = 0; i < graph.getTarget().getNumIPUs(); ++i)
    ipus.push_back(graph.createVirtualGraph(i * kTilesPerIpu, (i + 1) * kTilesPerIpu));
  return ipus;
}

/// Sets the environment variable for the engines made while it lives.
struct SequentialIpus {
  SequentialIpus() { setenv("POPLAR_HOST_IPU_THREADS", "0", 1); }
  ~SequentialIpus() { unsetenv("POPLAR_HOST_IPU_THREADS"); }
};

Execute addStep(Graph &g, const Tensor &x, int step, unsigned tile, const std::string &name) {
  ComputeSet cs = g.addComputeSet(name);
  VertexRef v = g.addVertex(cs, "AddStep", {{"x", x}});
  g.setInitialValue(v["step"], step);
  g.setTileMapping(v, tile);
  return Execute(cs);
}

// --- 1: a pipeline of four IPUs gives the sequential results ----------------------
void pipeline() {
  const unsigned P = 4, N = 3, cycles = 3;
  Device device = makeDevice(P);
  Graph graph(device.getTarget());
  graph.addCodelets("ipu_threads.gp");
  auto ipu = perIpu(graph);
  std::vector<Tensor> c, in, pred, cf;
  std::vector<Program> stage, accumulate;
  for (unsigned i = 0; i < P; ++i) {
    c.push_back(ipu[i].addVariable(INT, {N}, "c" + std::to_string(i)));
    in.push_back(ipu[i].addVariable(INT, {N}, "in" + std::to_string(i)));
    pred.push_back(ipu[i].addVariable(BOOL, {}, "pred" + std::to_string(i)));
    for (unsigned k = 0; k < N; ++k) ipu[i].setTileMapping(c[i][k], k);
    ipu[i].setTileMapping(in[i], 3);
    ipu[i].setTileMapping(pred[i], 3);
    graph.setInitialValue(c[i], ArrayRef<int>(std::vector<int>{int(i), int(10 * i), int(100 * i)}));
    graph.setInitialValue(pred[i], i % 2 == 0);
    graph.createHostRead("c" + std::to_string(i), c[i]);
    // c += (i + 1) in a loop of i + 2, then +1000 if pred (even IPUs); cf = float(c) (PopLibs)
    Sequence s({Repeat(i + 2, addStep(ipu[i], c[i], int(i) + 1, 0, "add" + std::to_string(i))),
                If(pred[i], addStep(ipu[i], c[i], 1000, 1, "big" + std::to_string(i)), Sequence())});
    cf.push_back(popops::cast(ipu[i], c[i], FLOAT, s));
    graph.createHostRead("cf" + std::to_string(i), cf[i]);
    stage.push_back(s);
    ComputeSet acc = ipu[i].addComputeSet("acc" + std::to_string(i));
    VertexRef v = ipu[i].addVertex(acc, "Accumulate", {{"x", c[i]}, {"y", in[i]}});
    ipu[i].setTileMapping(v, 2);
    accumulate.push_back(Execute(acc));
  }
  // One cycle: every stage, then each IPU's counter to the next IPU, then each adds what it got.
  Sequence cycle;
  for (auto &s : stage) cycle.add(s);
  for (unsigned i = 0; i + 1 < P; ++i) cycle.add(Copy(c[i], in[i + 1]));
  for (auto &a : accumulate) cycle.add(a);
  Sequence prog({Repeat(cycles, cycle)});

  // the sequential semantics, on the host
  std::vector<std::vector<int>> hc(P), hin(P, std::vector<int>(N, 0));
  std::vector<std::vector<float>> hcf(P);
  for (unsigned i = 0; i < P; ++i) hc[i] = {int(i), int(10 * i), int(100 * i)};
  for (unsigned r = 0; r < cycles; ++r) {
    for (unsigned i = 0; i < P; ++i) {
      for (auto &v : hc[i]) v += int(i + 1) * int(i + 2) + (i % 2 == 0 ? 1000 : 0);
      hcf[i].assign(hc[i].begin(), hc[i].end());
    }
    for (unsigned i = 0; i + 1 < P; ++i) hin[i + 1] = hc[i];
    for (unsigned i = 0; i < P; ++i)
      for (unsigned k = 0; k < N; ++k) hc[i][k] += hin[i][k];
  }

  auto check = [&](Engine &engine) {
    engine.load(device);
    engine.run(0);
    for (unsigned i = 0; i < P; ++i) {
      std::vector<int> got(N);
      std::vector<float> gotF(N);
      engine.readTensor("c" + std::to_string(i), got.data(), got.data() + N);
      engine.readTensor("cf" + std::to_string(i), gotF.data(), gotF.data() + N);
      CHECK_VEC(got, hc[i]);
      CHECK_VEC(gotF, hcf[i]);
    }
  };
  Engine threaded(graph, prog);
  check(threaded);
  SequentialIpus off;
  Engine sequential(graph, prog);
  check(sequential);
}

// --- 2: two IPUs' vertices meet: only possible if they run at the same time -----
struct HandshakeGraph {
  Graph graph;
  Sequence prog;
  explicit HandshakeGraph(const Device &device, unsigned replicas, unsigned timeoutMs)
      : graph(device.getTarget(), replication_factor(replicas)) {
    graph.addCodelets("ipu_threads.gp");
    auto ipu = perIpu(graph);
    for (unsigned side = 0; side < 2; ++side) {
      Graph &g = ipu[side];
      // each IPU reads its own copy of the slot, so each compute set touches one IPU
      Tensor slot = g.addVariable(UNSIGNED_INT, {}, "slot" + std::to_string(side));
      Tensor seen = g.addVariable(UNSIGNED_INT, {}, "seen" + std::to_string(side));
      g.setTileMapping(slot, 0);
      g.setTileMapping(seen, 1);
      graph.createHostWrite("slot" + std::to_string(side), slot);
      graph.createHostRead("seen" + std::to_string(side), seen);
      ComputeSet cs = g.addComputeSet("handshake" + std::to_string(side));
      VertexRef v = g.addVertex(cs, "Handshake", {{"slot", slot}, {"seen", seen}});
      g.setInitialValue(v["side"], side);
      g.setInitialValue(v["timeoutMs"], timeoutMs);
      g.setTileMapping(v, 2);
      // a PopLibs step on IPU 1 before its vertex: it must not hold IPU 0 up
      if (side == 1) {
        Tensor scratch = g.addVariable(FLOAT, {4}, "scratch");
        g.setTileMapping(scratch, 3);
        popops::zero(g, scratch, prog);
      }
      prog.add(Execute(cs));
    }
  }
  /// seen0 and seen1 of every replica, replica-major.
  std::vector<unsigned> run(const Device &device, Engine &engine, unsigned replicas) {
    static unsigned nextSlot = 0; // a fresh handshake (see the codelets) per replica and run
    engine.load(device);
    std::vector<unsigned> slots(replicas);
    for (unsigned r = 0; r < replicas; ++r) slots[r] = nextSlot++;
    engine.writeTensor("slot0", slots.data(), slots.data() + replicas);
    engine.writeTensor("slot1", slots.data(), slots.data() + replicas);
    engine.run(0);
    std::vector<unsigned> seen0(replicas), seen1(replicas), out;
    engine.readTensor("seen0", seen0.data(), seen0.data() + replicas);
    engine.readTensor("seen1", seen1.data(), seen1.data() + replicas);
    for (unsigned r = 0; r < replicas; ++r) out.insert(out.end(), {seen0[r], seen1[r]});
    return out;
  }
};

void handshake() {
  { // a generous timeout: it only runs out when the IPUs do not run at the same time
    Device device = makeDevice(2);
    HandshakeGraph h(device, 1, 20000);
    Engine engine(h.graph, h.prog);
    CHECK_VEC(h.run(device, engine, 1), (std::vector<unsigned>{1, 1}));
  }
  { // two replicas of two IPUs: four threads
    Device device = makeDevice(4);
    HandshakeGraph h(device, 2, 20000);
    Engine engine(h.graph, h.prog);
    CHECK_VEC(h.run(device, engine, 2), (std::vector<unsigned>{1, 1, 1, 1}));
  }
  { // threads off: IPU 0's vertex gives up before IPU 1's runs
    Device device = makeDevice(2);
    HandshakeGraph h(device, 1, 50);
    SequentialIpus off;
    Engine engine(h.graph, h.prog);
    CHECK_VEC(h.run(device, engine, 1), (std::vector<unsigned>{0, 1}));
  }
}

// --- 3: a vertex failing on one IPU ----------------------------------------------
void failures() {
  Device device = makeDevice(2);
  Graph graph(device.getTarget());
  graph.addCodelets("ipu_threads.gp");
  auto ipu = perIpu(graph);
  Tensor x0 = ipu[0].addVariable(INT, {1}, "x0"), x1 = ipu[1].addVariable(INT, {1}, "x1");
  ipu[0].setTileMapping(x0, 0);
  ipu[1].setTileMapping(x1, 0);
  graph.createHostRead("x0", x0);
  graph.createHostRead("x1", x1);
  auto failAbove = [&](Graph &g, const Tensor &x, int limit, unsigned delayMs, const std::string &name) {
    ComputeSet cs = g.addComputeSet(name);
    VertexRef v = g.addVertex(cs, "FailAbove", {{"x", x[0]}});
    g.setInitialValue(v["limit"], limit);
    g.setInitialValue(v["delayMs"], delayMs);
    g.setTileMapping(v, 1);
    return Execute(cs);
  };
  // IPU 1 counts to 200 while IPU 0 fails in its 4th iteration: as in the sequential
  // run, IPU 1's loop (the earlier child) completes.
  Sequence loops({Repeat(200, addStep(ipu[1], x1, 1, 0, "inc1")),
                  Repeat(10, Sequence({addStep(ipu[0], x0, 1, 0, "inc0"), failAbove(ipu[0], x0, 3, 0, "fail0")}))});
  // Both fail; the first child's failure (IPU 1, slower) is the one reported.
  Sequence both({failAbove(ipu[1], x1, -1, 200, "late1"), failAbove(ipu[0], x0, -1, 0, "early0")});
  Engine engine(graph, {loops, both});
  engine.load(device);
  CHECK_THROWS(poplar::application_runtime_error, engine.run(0), "'FailAbove' in compute set 'fail0'");
  int v0 = 0, v1 = 0;
  engine.readTensor("x0", &v0, &v0 + 1);
  engine.readTensor("x1", &v1, &v1 + 1);
  CHECK_EQ(v0, 4);
  CHECK_EQ(v1, 200);
  CHECK_THROWS(poplar::application_runtime_error, engine.run(1), "in compute set 'late1'");
  CHECK_THROWS(poplar::application_runtime_error, engine.run(1), "in compute set 'late1'");
  CHECK_THROWS(poplar::application_runtime_error, engine.run(0), "in compute set 'fail0'"); // the engine still works
}

// --- 4: prints, streams and remote buffers keep the sequential order ------------------
void ordering() {
  Device device = makeDevice(2);
  Graph graph(device.getTarget());
  graph.addCodelets("ipu_threads.gp");
  auto ipu = perIpu(graph);
  Tensor a = ipu[0].addVariable(INT, {3}, "a"), b = ipu[1].addVariable(INT, {3}, "b");
  Tensor bFromA = ipu[1].addVariable(INT, {3}, "bFromA");
  ipu[0].setTileMapping(a, 0);
  ipu[1].setTileMapping(b, 0);
  ipu[1].setTileMapping(bFromA, 1);
  graph.createHostRead("b", b);
  graph.createHostRead("bFromA", bFromA);
  DataStream shared = graph.addHostToDeviceFIFO("shared", INT, 3);
  DataStream outA = graph.addDeviceToHostFIFO("outA", INT, 3), outB = graph.addDeviceToHostFIFO("outB", INT, 3);
  RemoteBuffer rb = graph.addRemoteBuffer("rb", INT, 3);
  // One stream feeds both IPUs: a first, then b. The remote buffer goes from IPU 0 to IPU 1.
  Sequence prog({Copy(shared, a), Copy(shared, b), PrintTensor("b", b), PrintTensor("a", a),
                 addStep(ipu[0], a, 10, 1, "a10"), addStep(ipu[1], b, 20, 1, "b20"), PrintTensor("b+20", b),
                 Copy(a, rb), Copy(rb, bFromA), Copy(a, outA), Copy(b, outB), PrintTensor("a+10", a)});
  Engine engine(graph, prog);
  std::ostringstream printed;
  engine.setPrintStream(printed);
  engine.load(device);
  std::vector<int> in{1, 2, 3, 4, 5, 6}, gotA(3), gotB(3);
  engine.connectStream("shared", in.data(), in.data() + in.size());
  engine.connectStream("outA", gotA.data(), gotA.data() + 3);
  engine.connectStreamToCallback("outB", [&](void *p) { std::memcpy(gotB.data(), p, 3 * sizeof(int)); });
  engine.run(0);
  CHECK_VEC(gotA, (std::vector<int>{11, 12, 13}));
  CHECK_VEC(gotB, (std::vector<int>{24, 25, 26}));
  std::vector<int> viaRemote(3);
  engine.readTensor("bFromA", viaRemote.data(), viaRemote.data() + 3);
  CHECK_VEC(viaRemote, (std::vector<int>{11, 12, 13}));
  CHECK_EQ(printed.str(), std::string("b: [4 5 6]\na: [1 2 3]\nb+20: [24 25 26]\na+10: [11 12 13]\n"));
}

} // namespace

int main() {
  unsetenv("POPLAR_HOST_IPU_THREADS");
  pipeline();
  handshake();
  failures();
  ordering();
  return check::finish("ipu_threads");
}
