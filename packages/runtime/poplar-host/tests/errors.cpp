// Errors a Poplar user meets, with the types and messages Poplar uses:
// out of memory on a tile, tensors and vertices without a tile mapping,
// unknown vertex types and fields, bad connections, vertices that fail,
// bad copies, unconnected streams.
// codelets: codelets/tutorial.cpp
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poputil/TileMapping.hpp>

#include "check.hpp"

using namespace poplar;
using namespace poplar::program;

int main() {
  IPUModel model;
  model.tilesPerIPU = 4;
  Device device = model.createDevice();
  const Target target = device.getTarget();

  { // 638976 / 4 + 1 floats on one tile: 638980 bytes.
    Graph g(target);
    Tensor big = g.addVariable(FLOAT, {638976 / 4 + 1}, "big");
    g.setTileMapping(big, 2);
    Tensor fits = g.addVariable(FLOAT, {638976 / 4}, "fits");
    g.setTileMapping(fits, 1);
    CHECK_THROWS(poplar::graph_memory_allocation_error, Engine(g, Sequence()),
                 "Out of memory on tile 2: 638980 bytes used but tiles only have 638976 bytes of memory");
    Engine allowed(g, Sequence(), {{"debug.allowOutOfMemory", "true"}});
    CHECK(true);
  }
  { // Two tensors that fit alone but not together, and vertex state.
    Graph g(target);
    g.addCodelets("tutorial.gp");
    Tensor a = g.addVariable(FLOAT, {100000}, "a"), b = g.addVariable(FLOAT, {59744}, "b");
    g.setTileMapping(a, 0);
    g.setTileMapping(b, 0);
    ComputeSet cs = g.addComputeSet("cs");
    VertexRef v = g.addVertex(cs, "tg::Square", {{"in", a.slice(0, 1)}, {"out", a.slice(1, 2)}});
    g.setTileMapping(v, 0);
    // 638976 bytes of data plus the vertex's state (a word and two vectors).
    CHECK_THROWS(poplar::graph_memory_allocation_error, Engine(g, Execute(cs)), "Out of memory on tile 0: 638996 bytes");
  }
  { // Unmapped and partially mapped tensors.
    Graph g(target);
    Tensor lonely = g.addVariable(FLOAT, {3}, "lonely");
    (void)lonely;
    CHECK_THROWS(poplar::invalid_graph, Engine(g, Sequence()), "Tensor lonely has no tile mapping");
    CHECK_THROWS(poplar::invalid_tile_mapping, Engine(g, Sequence()), "has no tile mapping");
    g.setTileMapping(lonely.slice(0, 2), 0);
    CHECK_THROWS(poplar::invalid_graph, Engine(g, Sequence()), "Tensor lonely has no tile mapping");
    g.setTileMapping(lonely[2], 3);
    Engine ok(g, Sequence());
    CHECK_THROWS(poplar::invalid_tile_mapping, g.setTileMapping(lonely, 4), "out of range");
    Tensor c = g.addConstant<float>(FLOAT, {2}, {1, 2}, "c");
    CHECK_THROWS(poplar::invalid_graph, Engine(g, Sequence()), "Tensor c has no tile mapping");
  }
  { // Vertices.
    Graph g(target);
    ComputeSet cs = g.addComputeSet("cs");
    CHECK_THROWS(poplar::unknown_vertex_type, g.addVertex(cs, "SumVertex"), "call Graph::addCodelets first");
    g.addCodelets("tutorial.gp");
    CHECK_THROWS(poplar::unknown_vertex_type, g.addVertex(cs, "NoSuchVertex"), "Unknown vertex type 'NoSuchVertex'");
    CHECK(g.hasCodelet("tg::util::Concat"));
    CHECK(!g.hasCodelet("ScaleAdd<int>"));
    Tensor f = g.addVariable(FLOAT, {4}, "f"), i = g.addVariable(INT, {4}, "i");
    Tensor k = g.addConstant<float>(FLOAT, {1}, 1.0f);
    for (auto &t : {f, i, k}) g.setTileMapping(t, 0);
    VertexRef v = g.addVertex(cs, "SumVertex");
    CHECK_THROWS(poplar::graph_connection_error, g.connect(v["in"], i), "type mismatch");
    CHECK_THROWS(poplar::graph_connection_error, g.connect(v["out"], f), "scalar");
    CHECK_THROWS(poplar::unknown_field, g.connect(v["nope"], f), "has no field 'nope'");
    CHECK_THROWS(poplar::graph_connection_error, g.connect(v["out"], k), "constant");
    g.connect(v["in"], f);
    g.setTileMapping(v, 0);
    CHECK_THROWS(poplar::graph_connection_error, Engine(g, Execute(cs)), "Field 'out' of vertex 0");
    g.connect(v["out"], f[0]);
    Engine ok(g, Execute(cs));

    ComputeSet cs2 = g.addComputeSet("cs2");
    VertexRef ac = g.addVertex(cs2, "AddConst", {{"in", i}, {"out", i}});
    g.setTileMapping(ac, 1);
    CHECK_THROWS(poplar::graph_connection_error, Engine(g, Execute(cs2)), "has no value");
    CHECK_THROWS(poplar::graph_connection_error, g.setInitialValue(ac["in"], 3), "it is an edge");
    g.setInitialValue(ac["delta"], 13);
    g.setInitialValue(ac["unusedState"], 0);
    g.setInitialValue(ac["offsets"], ArrayRef<unsigned>({1u}));
    ComputeSet cs3 = g.addComputeSet("cs3");
    VertexRef lost = g.addVertex(cs3, "Move", {{"src", f}, {"dst", f}});
    (void)lost;
    CHECK_THROWS(poplar::invalid_tile_mapping, Engine(g, Execute(cs3)), "has no tile mapping");
    g.setTileMapping(lost, 2);
    Engine engine(g, {Execute(cs2), Sequence({Abort("stop here")})});
    CHECK_THROWS(poplar::runtime_error, engine.run(0), "before Engine::load");
    engine.load(device);
    // delta 13 makes AddConst return false.
    CHECK_THROWS(poplar::application_runtime_error, engine.run(0),
                 "vertex 1 ('AddConst' in compute set 'cs2') returned false");
    CHECK_THROWS(poplar::application_runtime_error, engine.run(1), "stop here");
  }
  { // A MultiVertex whose fourth worker returns false: the workers before it ran, the error names it.
    Graph g(target);
    g.addCodelets("tutorial.gp");
    Tensor marks = g.addVariable(INT, {6}, "marks");
    g.setTileMapping(marks, 0);
    g.createHostWrite("marks.in", marks);
    g.createHostRead("marks.out", marks);
    ComputeSet cs = g.addComputeSet("workers");
    VertexRef v = g.addVertex(cs, "MarkWorkers", {{"marks", marks}});
    g.setInitialValue(v["failOn"], 3u);
    g.setTileMapping(v, 0);
    Engine engine(g, Execute(cs));
    engine.load(device);
    std::vector<int> zeros(6, 0), got(6, -1);
    engine.writeTensor("marks.in", zeros.data(), zeros.data() + zeros.size());
    CHECK_THROWS(poplar::application_runtime_error, engine.run(0),
                 "vertex 0 ('MarkWorkers' in compute set 'workers') returned false from compute() on worker 3");
    engine.readTensor("marks.out", got.data(), got.data() + got.size());
    CHECK(got == std::vector<int>({1, 1, 1, 0, 0, 0}));
    CHECK_THROWS(poplar::index_error, engine.run(2), "program 2 does not exist");
  }
  { // Programs and streams.
    Graph g(target);
    Tensor a = g.addVariable(FLOAT, {4}, "a"), b = g.addVariable(FLOAT, {5}, "b"), c = g.addVariable(INT, {4}, "c");
    for (auto &t : {a, b, c}) poputil::mapTensorLinearly(g, t);
    CHECK_THROWS(poplar::control_program_error, Copy(a, b), "differ in size");
    CHECK_THROWS(poplar::control_program_error, Copy(a, c), "type");
    DataStream in = g.addHostToDeviceFIFO("in", FLOAT, 4);
    CHECK_THROWS(poplar::control_program_error, Copy(in, b), "carries 4 float elements");
    CHECK_THROWS(poplar::poplar_error, g.addDeviceToHostFIFO("in", FLOAT, 4), "already in use");
    Engine engine(g, Copy(in, a));
    engine.load(device);
    CHECK_THROWS(poplar::stream_connection_error, engine.run(), "stream 'in' is not connected");
    CHECK_THROWS(poplar::stream_connection_error, engine.connectStream("nope", nullptr, nullptr), "no stream named");
    CHECK_THROWS(poplar::poplar_error, engine.readTensor("nope", nullptr, nullptr), "no host read handle 'nope'");
    Sequence loopA, loopB;
    loopA.add(loopB);
    loopB.add(loopA);
    CHECK_THROWS(poplar::graph_cycle_error, Engine(g, loopA), "contains itself");
    // A callback instead of a buffer.
    int calls = 0;
    engine.connectStreamToCallback("in", [&](void *p) {
      float *f = static_cast<float *>(p);
      for (int j = 0; j < 4; ++j) f[j] = float(j + calls);
      ++calls;
    });
    engine.run();
    engine.run();
    CHECK_EQ(calls, 2);
  }
  { // A graph from the tests' codelets without addCodelets linking anything is
    // covered by popc-reflect's own test; replication needs enough IPUs.
    CHECK_THROWS(poplar::graph_replication_error, Graph(target, replication_factor(2)), "cannot replicate");
  }
  return check::finish("errors");
}
