// Vertex fields connected to views: broadcasts, reversed, strided, transposed and concatenated
// inputs, and outputs written through strided and reversed views, all in one compute set, so
// that inputs read where they lie and fields moved in strided runs are checked against
// element-by-element expectations, including the BSP rule (reads see the values from before the
// compute set, whatever the other vertices write).
// codelets: codelets/tutorial.cpp
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>

#include "check.hpp"

#include <vector>

using namespace poplar;
using namespace poplar::program;

int main() {
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 4;
  Device device = ipuModel.createDevice();
  Graph graph(device.getTarget());
  graph.addCodelets("tutorial.gp");

  // v = 0..11, w = 100..103, s = 7, m = v as [3][4]
  std::vector<float> vInit(12), wInit{100, 101, 102, 103};
  for (unsigned i = 0; i < 12; ++i) vInit[i] = float(i);
  Tensor v = graph.addVariable(FLOAT, {12}, "v");
  Tensor w = graph.addVariable(FLOAT, {4}, "w");
  Tensor s = graph.addVariable(FLOAT, {1}, "s");
  graph.setTileMapping(v, 0);
  graph.setTileMapping(w, 1);
  graph.setTileMapping(s, 2);
  graph.setInitialValue(v, ArrayRef<float>(vInit));
  graph.setInitialValue(w, ArrayRef<float>(wInit));
  graph.setInitialValue(s, ArrayRef<float>({7.f}));
  const Tensor m = v.reshape({3, 4});

  struct Case {
    const char *name;
    Tensor src;
    std::vector<float> expect;
  };
  std::vector<Case> cases{
      {"broadcast", s.broadcast(5, 0), {7, 7, 7, 7, 7}},
      {"reversed", v.slice(2, 7).reverse(0), {6, 5, 4, 3, 2}},
      {"strided", v.subSample(3, 0), {0, 3, 6, 9}},
      {"transposed", m.transpose().flatten(), {0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11}},
      {"concatenated", concat(v.slice(10, 12), w), {10, 11, 100, 101, 102, 103}},
      {"broadcast rows", m.slice(1, 2, 0).broadcast(2, 0).flatten(), {4, 5, 6, 7, 4, 5, 6, 7}},
      {"broadcast strided", v.subSample(4, 0).reshape({1, 3}).broadcast(3, 0).flatten(), {0, 4, 8, 0, 4, 8, 0, 4, 8}},
      {"broadcast columns", m.slice(0, 2, 1).reshape({3, 2, 1}).broadcast(2, 2).flatten(), {0, 0, 1, 1, 4, 4, 5, 5, 8, 8, 9, 9}},
  };
  ComputeSet cs = graph.addComputeSet("fields");
  std::vector<Tensor> outs;
  for (const auto &c : cases) {
    Tensor out = graph.addVariable(FLOAT, {c.src.numElements()}, c.name);
    graph.setTileMapping(out, 3);
    VertexRef vx = graph.addVertex(cs, "Move", {{"src", c.src}, {"dst", out}});
    graph.setTileMapping(vx, 3);
    graph.createHostRead(c.name, out);
    outs.push_back(out);
  }
  // Outputs through views: every other element of w (the others keep their values), and v's
  // first four elements in reverse. Other vertices of this compute set read v and w, and must see
  // the values from before it.
  VertexRef toW = graph.addVertex(cs, "Move", {{"src", s.broadcast(2, 0)}, {"dst", w.subSample(2, 0)}});
  VertexRef toV = graph.addVertex(cs, "Move", {{"src", w.slice(0, 4)}, {"dst", v.slice(0, 4).reverse(0)}});
  graph.setTileMapping(toW, 1);
  graph.setTileMapping(toV, 0);
  graph.createHostRead("v", v);
  graph.createHostRead("w", w);
  // and into a transposed view: runs a row apart, repeated a column further on each time
  Tensor q = graph.addVariable(FLOAT, {3, 4}, "q");
  graph.setTileMapping(q, 3);
  graph.createHostRead("q", q);
  graph.setTileMapping(graph.addVertex(cs, "Move", {{"src", v}, {"dst", q.transpose().flatten()}}), 3);

  // A second compute set: outputs that are one run of a variable are written where they lie only
  // when no other field overlaps them. x[0:4] is written while another vertex reads x[2:6], y[1:5]
  // by the vertex reading y[0:4], z[0:4] beside a vertex reading z[4:8]; each reader must see the
  // values from before the compute set.
  const auto ramp = [&](const char *name, std::size_t n, float start) {
    std::vector<float> init(n);
    for (std::size_t i = 0; i < n; ++i) init[i] = start + float(i);
    Tensor t = graph.addVariable(FLOAT, {n}, name);
    graph.setTileMapping(t, 2);
    graph.setInitialValue(t, ArrayRef<float>(init));
    graph.createHostRead(name, t);
    return t;
  };
  const Tensor u = ramp("u", 4, 50), x = ramp("x", 8, 0), y = ramp("y", 8, 20), z = ramp("z", 8, 30);
  const Tensor xRead = ramp("xRead", 4, 0), zRead = ramp("zRead", 4, 0);
  ComputeSet inPlace = graph.addComputeSet("in place");
  for (const auto &edges : std::vector<std::pair<Tensor, Tensor>>{
           {u, x.slice(0, 4)}, {x.slice(2, 6), xRead}, {y.slice(0, 4), y.slice(1, 5)}, {u, z.slice(0, 4)}, {z.slice(4, 8), zRead}})
    graph.setTileMapping(graph.addVertex(inPlace, "Move", {{"src", edges.first}, {"dst", edges.second}}), 2);

  Engine engine(graph, Sequence({Execute(cs), Execute(inPlace)}));
  engine.load(device);
  engine.run(0);
  for (const auto &c : cases) {
    std::vector<float> got(c.expect.size());
    engine.readTensor(c.name, got.data(), got.data() + got.size());
    ::check::report(got == c.expect, std::string(c.name) + ": got " + check::vec(got) + ", expected " + check::vec(c.expect), __FILE__, __LINE__);
  }
  std::vector<float> gotV(12), gotW(4);
  engine.readTensor("v", gotV.data(), gotV.data() + gotV.size());
  engine.readTensor("w", gotW.data(), gotW.data() + gotW.size());
  std::vector<float> expectV = vInit;
  for (unsigned i = 0; i < 4; ++i) expectV[3 - i] = wInit[i]; // w as it was before the compute set
  CHECK_VEC(gotV, expectV);
  const std::vector<float> expectW{7, 101, 7, 103};
  CHECK_VEC(gotW, expectW);
  std::vector<float> gotQ(12);
  engine.readTensor("q", gotQ.data(), gotQ.data() + gotQ.size());
  const std::vector<float> expectQ{0, 3, 6, 9, 1, 4, 7, 10, 2, 5, 8, 11}; // q[j][i] = v[3i + j] as before the compute set
  CHECK_VEC(gotQ, expectQ);
  const std::vector<std::pair<const char *, std::vector<float>>> inPlaceExpect{
      {"x", {50, 51, 52, 53, 4, 5, 6, 7}}, {"xRead", {2, 3, 4, 5}},        {"y", {20, 20, 21, 22, 23, 25, 26, 27}},
      {"z", {50, 51, 52, 53, 34, 35, 36, 37}}, {"zRead", {34, 35, 36, 37}}, {"u", {50, 51, 52, 53}}};
  for (const auto &c : inPlaceExpect) {
    std::vector<float> got(c.second.size());
    engine.readTensor(c.first, got.data(), got.data() + got.size());
    ::check::report(got == c.second, std::string(c.first) + ": got " + check::vec(got) + ", expected " + check::vec(c.second), __FILE__, __LINE__);
  }
  return check::finish("vertex_fields");
}
