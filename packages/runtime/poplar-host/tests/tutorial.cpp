// A tutorial-style Poplar program: variables, constants, tile mappings,
// codelets (Vertex, MultiVertex, templates, lists, state), compute sets,
// Repeat, streams, host read/write handles, tensor views as sources and
// destinations of copies, BSP semantics, control flow and virtual graphs.
// codelets: codelets/tutorial.cpp
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poputil/TileMapping.hpp>
#include <poputil/VertexTemplates.hpp>

#include "check.hpp"

#include <sstream>
#include <vector>

using namespace poplar;
using namespace poplar::program;

namespace {

std::vector<float> toFloats(const Target &target, const std::vector<std::uint16_t> &h) {
  std::vector<float> f(h.size());
  copyDeviceHalfToFloat(target, h.data(), f.data(), h.size());
  return f;
}

} // namespace

int main() {
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 8;
  Device device = ipuModel.createDevice();
  Target target = device.getTarget();
  CHECK_EQ(target.getNumTiles(), 8u);
  CHECK_EQ(target.getBytesPerTile(), 638976u);
  CHECK_EQ(target.getNumWorkerContexts(), 6u);

  Graph graph(target);
  graph.addCodelets("tutorial.gp");
  std::ostringstream printed;

  // --- A: tutorial 3 -------------------------------------------------------------
  Tensor v1 = graph.addVariable(FLOAT, {4}, "v1");
  Tensor v2 = graph.addVariable(FLOAT, {4}, "v2");
  for (unsigned i = 0; i < 4; ++i) {
    graph.setTileMapping(v1[i], i);
    graph.setTileMapping(v2[i], i);
  }
  Sequence progA;
  Tensor c1 = graph.addConstant<float>(FLOAT, {4}, {1.0, 1.5, 2.0, 2.5});
  graph.setTileMapping(c1, 0);
  progA.add(Copy(c1, v1));
  ComputeSet sumCS = graph.addComputeSet("sum");
  for (unsigned i = 0; i < 4; ++i) {
    VertexRef vtx = graph.addVertex(sumCS, "SumVertex");
    graph.connect(vtx["in"], v1.slice(i, 4));
    graph.connect(vtx["out"], v2[i]);
    graph.setTileMapping(vtx, i);
    graph.setPerfEstimate(vtx, 20);
  }
  progA.add(Execute(sumCS));
  progA.add(PrintTensor("v2", v2));
  graph.createHostRead("v2-read", v2);

  // --- B: a MultiVertex template, float and half, under Repeat ------------------------
  Tensor x = graph.addVariable(FLOAT, {10}, "x");
  Tensor y = graph.addVariable(FLOAT, {10}, "y");
  poputil::mapTensorLinearly(graph, x);
  poputil::mapTensorLinearly(graph, y);
  graph.setInitialValue(y, ArrayRef<float>(std::vector<float>(10, 2.0f)));
  ComputeSet axpy = graph.addComputeSet("axpy");
  VertexRef va = graph.addVertex(axpy, poputil::templateVertex("ScaleAdd", FLOAT), {{"x", x}, {"y", y}});
  graph.setInitialValue(va["scale"], 0.5f);
  graph.setTileMapping(va, 0);
  Tensor xh = graph.addVariable(HALF, {3}, "xh");
  Tensor yh = graph.addVariable(HALF, {3}, "yh");
  graph.setTileMapping(xh, 1);
  graph.setTileMapping(yh, 1);
  VertexRef vh = graph.addVertex(axpy, "ScaleAdd< half >", {{"x", xh}, {"y", yh}});
  graph.setInitialValue(vh["scale"], 1.0);
  graph.setTileMapping(vh, 1);
  Sequence progB({Repeat(3, Execute(axpy))});
  graph.createHostWrite("x-write", x);
  graph.createHostRead("y-read", y);
  graph.createHostWrite("xh-write", xh);
  graph.createHostWrite("yh-write", yh);
  graph.createHostRead("yh-read", yh);

  // --- C: streams ---------------------------------------------------------------------
  Tensor sIn = graph.addVariable(FLOAT, {2, 2}, "sIn");
  Tensor sOut = graph.addVariable(FLOAT, {2, 2}, "sOut");
  graph.setTileMapping(sIn, 2);
  graph.setTileMapping(sOut, 3);
  ComputeSet sq = graph.addComputeSet("square");
  VertexRef vs = graph.addVertex(sq, "tg::Square");
  graph.connect(vs["in"], sIn.flatten());
  graph.connect(vs["out"], sOut.flatten());
  graph.setTileMapping(vs, 3);
  DataStream inStream = graph.addHostToDeviceFIFO("in", FLOAT, 4);
  DataStream outStream = graph.addDeviceToHostFIFO("out", FLOAT, 4);
  Sequence progC({Repeat(3, Sequence({Copy(inStream, sIn), Execute(sq), Copy(sOut, outStream)}))});

  // --- D: views ---------------------------------------------------------------------
  Tensor m = graph.addVariable(FLOAT, {2, 3}, "m");
  graph.setTileMapping(m, 4);
  graph.createHostWrite("m-write", m);
  Sequence progD;
  std::vector<std::pair<std::string, Tensor>> views = {
      {"transpose", m.transpose()},
      {"slice", m.slice(1, 3, 1)},
      {"dimShuffle", m.dimShuffle({1, 0}).flatten()},
      {"broadcastRow", m[1].broadcast(2, 0)},
      {"broadcastDim0", m.slice(0, 1, 0).broadcast(2, 0)},
      {"concat0", concat({m[1], m[0]})},
      {"concat1", concat(m, m, 1)},
      {"subSample", m.flatten().subSample(2, 0)},
      {"reverse", m.reverse(1)},
      {"reshapeT", m.reshape({3, 2}).transpose()},
      {"upsample", m.upsample(2, 1, UpsampleMethod::REPEAT)},
      {"index", m.index({1, 2})},
      {"composite", m.dimShuffle({1, 0}).reverse(0).slice(1, 3, 0)},
      {"sliceBoth", m.slice({0, 1}, {2, 3})},
      {"expandSqueeze", m.expand({0, 2}).squeeze({0}).reshape({6})},
      {"dimRoll", m.reshape({1, 2, 3}).dimRoll(2, 0).flatten()},
  };
  std::vector<std::string> viewNames;
  for (auto &v : views) {
    Tensor dst = graph.addVariable(FLOAT, v.second.shape(), "view-" + v.first);
    graph.setTileMapping(dst, 5);
    progD.add(Copy(v.second, dst));
    graph.createHostRead("read-" + v.first, dst);
    viewNames.push_back(v.first);
  }
  // A view as the destination: write a constant into the transpose of md.
  Tensor md = graph.addVariable(FLOAT, {2, 3}, "md");
  graph.setTileMapping(md, 5);
  Tensor cT = graph.addConstant<float>(FLOAT, {3, 2}, {10, 11, 12, 13, 14, 15});
  graph.setTileMapping(cT, 5);
  progD.add(Copy(cT, md.transpose()));
  graph.createHostRead("read-md", md);

  // --- E: BSP: two vertices swap two tensors in one compute set --------------------
  Tensor a = graph.addVariable(FLOAT, {3}, "a");
  Tensor b = graph.addVariable(FLOAT, {3}, "b");
  graph.setTileMapping(a, 6);
  graph.setTileMapping(b, 7);
  ComputeSet swapCS = graph.addComputeSet("swap");
  VertexRef m1 = graph.addVertex(swapCS, "Move", {{"src", a}, {"dst", b}});
  VertexRef m2 = graph.addVertex(swapCS, "Move", {{"src", b}, {"dst", a}});
  graph.setTileMapping(m1, 6);
  graph.setTileMapping(m2, 7);
  graph.setInitialValue(a, ArrayRef<float>({1.f, 2.f, 3.f}));
  graph.setInitialValue(b, ArrayRef<float>({4.f, 5.f, 6.f}));
  graph.createHostRead("a-read", a);
  graph.createHostRead("b-read", b);
  Sequence progE({Execute(swapCS)});

  // --- F: list fields, templates with defaults, state ------------------------------
  Tensor p = graph.addConstant<float>(FLOAT, {2}, {1, 2});
  Tensor q = graph.addConstant<float>(FLOAT, {3}, {3, 4, 5});
  graph.setTileMapping(p, 0);
  graph.setTileMapping(q, 0);
  Tensor pq = graph.addVariable(FLOAT, {5}, "pq");
  Tensor qp = graph.addVariable(FLOAT, {5}, "qp");
  graph.setTileMapping(pq, 0);
  graph.setTileMapping(qp, 0);
  ComputeSet fCS = graph.addComputeSet("fields");
  VertexRef cat1 = graph.addVertex(fCS, "tg::util::Concat");
  graph.connect(cat1["in"], {p, q});
  graph.connect(cat1["out"], pq);
  VertexRef cat2 = graph.addVertex(fCS, "tg::util::Concat");
  graph.setFieldSize(cat2["in"], 2);
  graph.connect(cat2["in"][0], q);
  graph.connect(cat2["in"][1], p);
  graph.connect(cat2["out"], qp);
  Tensor f1 = graph.addVariable(FLOAT, {}, "f1");
  Tensor f2 = graph.addVariable(FLOAT, {}, "f2");
  Tensor f3 = graph.addVariable(FLOAT, {}, "f3");
  Tensor i1 = graph.addConstant<int>(INT, {}, 7);
  Tensor i2 = graph.addVariable(INT, {}, "i2");
  for (auto &t : {f1, f2, f3, i1, i2}) graph.setTileMapping(t, 1);
  graph.setInitialValue(f1, 3.5f);
  VertexRef cp1 = graph.addVertex(fCS, poputil::templateVertex("tg::Copy1", FLOAT, false), {{"a", f1}, {"b", f2}});
  VertexRef cp2 = graph.addVertex(fCS, poputil::templateVertex("tg::Copy1", INT, true), {{"a", i1}, {"b", i2}});
  // Spelt from the global scope here, relative to namespace tg in the codelets.
  VertexRef sg = graph.addVertex(fCS, "tg::Signed<tg::Sign::Minus>", {{"a", f1}, {"b", f3}});
  Tensor ints = graph.addConstant<int>(INT, {3}, {1, 2, 3});
  Tensor intsOut = graph.addVariable(INT, {3}, "intsOut");
  graph.setTileMapping(ints, 2);
  graph.setTileMapping(intsOut, 2);
  VertexRef ac = graph.addVertex(fCS, "AddConst", {{"in", ints}, {"out", intsOut}});
  graph.setInitialValue(ac["delta"], 100);
  graph.setInitialValue(ac["unusedState"], 0u);
  graph.setInitialValue(ac["offsets"], ArrayRef<unsigned>({10u, 20u}));
  for (auto &v : {cat1, cat2, cp1, cp2, sg}) graph.setTileMapping(v, 0);
  graph.setTileMapping(ac, 2);
  graph.createHostRead("pq", pq);
  graph.createHostRead("qp", qp);
  graph.createHostRead("f2", f2);
  graph.createHostRead("f3", f3);
  graph.createHostRead("i2", i2);
  graph.createHostRead("intsOut", intsOut);
  Sequence progF({Execute(fCS)});

  // --- G: control flow ----------------------------------------------------------------
  Tensor counter = graph.addVariable(INT, {1}, "counter");
  Tensor counterNext = graph.addVariable(INT, {1}, "counterNext");
  Tensor pred = graph.addVariable(BOOL, {}, "pred");
  Tensor sel = graph.addVariable(INT, {}, "sel");
  Tensor log = graph.addVariable(INT, {4}, "log");
  for (auto &t : {counter, counterNext, pred, sel, log}) graph.setTileMapping(t, 3);
  ComputeSet test = graph.addComputeSet("test");
  VertexRef below = graph.addVertex(test, "Below", {{"x", counter.reshape({})}, {"pred", pred}});
  graph.setInitialValue(below["limit"], 5);
  graph.setTileMapping(below, 3);
  ComputeSet inc = graph.addComputeSet("inc");
  VertexRef incV = graph.addVertex(inc, "AddConst", {{"in", counter}, {"out", counterNext}});
  graph.setInitialValue(incV["delta"], 1);
  graph.setInitialValue(incV["unusedState"], 0);
  graph.setInitialValue(incV["offsets"], ArrayRef<unsigned>(std::vector<unsigned>{}));
  graph.setTileMapping(incV, 3);
  Sequence body({Execute(inc), Copy(counterNext, counter)});
  auto logConst = [&](int value) {
    Tensor c = graph.addConstant<int>(INT, {1}, value);
    graph.setTileMapping(c, 3);
    return c;
  };
  Function addOne = graph.addFunction(Sequence({Execute(inc), Copy(counterNext, counter)}));
  Sequence progG({RepeatWhileTrue(Execute(test), pred, body),
                  Switch(sel, {{0, Copy(logConst(100), log[0])}, {2, Copy(logConst(102), log[0])}},
                         Copy(logConst(999), log[0])),
                  If(pred, Copy(logConst(1), log[1]), Copy(logConst(-1), log[1])),
                  Call(addOne), Call(addOne)});
  graph.createHostWrite("sel-write", sel);
  graph.createHostRead("counter-read", counter);
  graph.createHostRead("log-read", log);

  // --- I: a compute set big enough to be split over threads ----------------------
  Tensor big = graph.addVariable(FLOAT, {8, 40000}, "big");
  Tensor bigSq = graph.addVariable(FLOAT, {8, 40000}, "bigSq");
  ComputeSet bigCS = graph.addComputeSet("bigSquare");
  for (unsigned i = 0; i < 8; ++i) {
    graph.setTileMapping(big[i], i);
    graph.setTileMapping(bigSq[i], i);
    VertexRef v = graph.addVertex(bigCS, "tg::Square", {{"in", big[i]}, {"out", bigSq[i]}});
    graph.setTileMapping(v, i);
  }
  graph.createHostWrite("big", big);
  graph.createHostRead("bigSq", bigSq);
  Sequence progI({Execute(bigCS)});

  // --- H: virtual graphs and linear mappings ---------------------------------------
  Graph vg = graph.createVirtualGraph(4, 8);
  CHECK_EQ(vg.getTarget().getNumTiles(), 4u);
  Tensor onVg = vg.addVariable(FLOAT, {2}, "onVg");
  vg.setTileMapping(onVg, 1);
  auto topMapping = graph.getTileMapping(onVg);
  CHECK_EQ(topMapping[5].size(), 1u);
  Tensor spread = graph.addVariable(FLOAT, {100}, "spread");
  poputil::mapTensorLinearly(graph, spread);
  // 50 grains of 2 floats, at least 32 floats (128 bytes) per tile: 32,32,32,4.
  auto sm = graph.getTileMapping(spread);
  CHECK_EQ(sm[0].size(), 1u);
  CHECK(sm[0].size() == 1 && sm[0][0] == Interval(0, 32));
  CHECK(sm[3].size() == 1 && sm[3][0] == Interval(96, 100));
  CHECK(sm[4].empty());

  Engine engine(graph, {progA, progB, progC, progD, progE, progF, progG, progI});
  engine.setPrintStream(printed);
  engine.load(device);

  // A
  engine.run(0);
  std::vector<float> h2(4);
  engine.readTensor("v2-read", h2.data(), h2.data() + h2.size());
  // v2[i] = sum of v1[i..3]: 7, 6, 4.5, 2.5
  CHECK_VEC(h2, (std::vector<float>{7.f, 6.f, 4.5f, 2.5f}));
  CHECK_EQ(printed.str(), std::string("v2: [7 6 4.5 2.5]\n"));

  // B: y = 2 + 3 * 0.5 * x; half: 1 + 3 * 2^-11 rounds back to 1 every time
  // (a tie, to even); 1 + 3 * (3 * 2^-12) moves by 2^-10 each time.
  std::vector<float> hx(10), hy(10);
  for (unsigned i = 0; i < 10; ++i) hx[i] = float(i);
  engine.writeTensor("x-write", hx.data(), hx.data() + hx.size());
  std::vector<float> xhF = {0.00048828125f, 0.000732421875f, 2.0f}, yhF = {1.0f, 1.0f, 1000.0f};
  std::vector<std::uint16_t> xhH(3), yhH(3);
  copyFloatToDeviceHalf(target, xhF.data(), xhH.data(), 3);
  copyFloatToDeviceHalf(target, yhF.data(), yhH.data(), 3);
  engine.writeTensor("xh-write", xhH.data(), xhH.data() + 3);
  engine.writeTensor("yh-write", yhH.data(), yhH.data() + 3);
  engine.run(1);
  engine.readTensor("y-read", hy.data(), hy.data() + hy.size());
  std::vector<float> expectY(10);
  for (unsigned i = 0; i < 10; ++i) expectY[i] = 2.f + 1.5f * float(i);
  CHECK_VEC(hy, expectY);
  engine.readTensor("yh-read", yhH.data(), yhH.data() + 3);
  CHECK_VEC(toFloats(target, yhH), (std::vector<float>{1.0f, 1.0029296875f, 1006.0f}));

  // C: three copies through the circular buffers, twice.
  std::vector<float> in(12), out(12, -1.f);
  for (unsigned i = 0; i < 12; ++i) in[i] = float(i) - 3.f;
  engine.connectStream("in", in.data(), in.data() + in.size());
  engine.connectStream("out", out.data(), out.data() + out.size());
  for (int run = 0; run < 2; ++run) {
    std::fill(out.begin(), out.end(), -1.f);
    engine.run(2);
    std::vector<float> expect(12);
    for (unsigned i = 0; i < 12; ++i) expect[i] = in[i] * in[i];
    CHECK_VEC(out, expect);
  }

  // D: views. m = [[0,1,2],[3,4,5]].
  std::vector<float> hm = {0, 1, 2, 3, 4, 5};
  engine.writeTensor("m-write", hm.data(), hm.data() + 6);
  engine.run(3);
  std::map<std::string, std::vector<float>> expectViews = {
      {"transpose", {0, 3, 1, 4, 2, 5}},
      {"slice", {1, 2, 4, 5}},
      {"dimShuffle", {0, 3, 1, 4, 2, 5}},
      {"broadcastRow", {3, 4, 5, 3, 4, 5}},
      {"broadcastDim0", {0, 1, 2, 0, 1, 2}},
      {"concat0", {3, 4, 5, 0, 1, 2}},
      {"concat1", {0, 1, 2, 0, 1, 2, 3, 4, 5, 3, 4, 5}},
      {"subSample", {0, 2, 4}},
      {"reverse", {2, 1, 0, 5, 4, 3}},
      {"reshapeT", {0, 2, 4, 1, 3, 5}},
      {"upsample", {0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5}},
      {"index", {5}},
      // transpose [[0,3],[1,4],[2,5]], rows reversed, rows 1..2
      {"composite", {1, 4, 0, 3}},
      {"sliceBoth", {1, 2, 4, 5}},
      {"expandSqueeze", {0, 1, 2, 3, 4, 5}},
      // [1,2,3] with the last dim moved first: [3,1,2]; element (k,0,j) = m[j][k]
      {"dimRoll", {0, 3, 1, 4, 2, 5}},
  };
  for (const auto &name : viewNames) {
    const auto &expect = expectViews[name];
    std::vector<float> got(expect.size());
    engine.readTensor("read-" + name, got.data(), got.data() + got.size());
    if (got != expect) std::cout << "view " << name << ":\n";
    CHECK_VEC(got, expect);
  }
  std::vector<float> hmd(6);
  engine.readTensor("read-md", hmd.data(), hmd.data() + 6);
  // md^T = [[10,11],[12,13],[14,15]] so md = [[10,12,14],[11,13,15]]
  CHECK_VEC(hmd, (std::vector<float>{10, 12, 14, 11, 13, 15}));

  // E
  engine.run(4);
  std::vector<float> ha(3), hb(3);
  engine.readTensor("a-read", ha.data(), ha.data() + 3);
  engine.readTensor("b-read", hb.data(), hb.data() + 3);
  CHECK_VEC(ha, (std::vector<float>{4, 5, 6}));
  CHECK_VEC(hb, (std::vector<float>{1, 2, 3}));

  // F
  engine.run(5);
  std::vector<float> hpq(5), hqp(5), hf2(1);
  std::vector<int> hi2(1), hints(3);
  engine.readTensor("pq", hpq.data(), hpq.data() + 5);
  engine.readTensor("qp", hqp.data(), hqp.data() + 5);
  engine.readTensor("f2", hf2.data(), hf2.data() + 1);
  float hf3 = 0;
  engine.readTensor("f3", &hf3, &hf3 + 1);
  CHECK_EQ(hf3, -3.5f);
  engine.readTensor("i2", hi2.data(), hi2.data() + 1);
  engine.readTensor("intsOut", hints.data(), hints.data() + 3);
  CHECK_VEC(hpq, (std::vector<float>{1, 2, 3, 4, 5}));
  CHECK_VEC(hqp, (std::vector<float>{3, 4, 5, 1, 2}));
  CHECK_EQ(hf2[0], 3.5f);
  CHECK_EQ(hi2[0], -7);
  // 1+100+10, 2+100+20, 3+100+0
  CHECK_VEC(hints, (std::vector<int>{111, 122, 103}));

  // G: count to 5, Switch on sel=2, If on the final predicate (false), two calls.
  int hsel = 2;
  engine.writeTensor("sel-write", &hsel, &hsel + 1);
  engine.run(6);
  int hcounter = 0;
  std::vector<int> hlog(4);
  engine.readTensor("counter-read", &hcounter, &hcounter + 1);
  engine.readTensor("log-read", hlog.data(), hlog.data() + 4);
  CHECK_EQ(hcounter, 7);
  CHECK_EQ(hlog[0], 102);
  CHECK_EQ(hlog[1], -1);
  hsel = 1; // no case: the default runs
  engine.writeTensor("sel-write", &hsel, &hsel + 1);
  engine.run(6);
  engine.readTensor("log-read", hlog.data(), hlog.data() + 4);
  CHECK_EQ(hlog[0], 999);

  // I
  std::vector<float> hbig(8 * 40000), hbigSq(8 * 40000), expectSq(8 * 40000);
  for (unsigned i = 0; i < hbig.size(); ++i) {
    hbig[i] = float(i % 1000) * 0.5f;
    expectSq[i] = hbig[i] * hbig[i];
  }
  engine.writeTensor("big", hbig.data(), hbig.data() + hbig.size());
  engine.run(7);
  engine.readTensor("bigSq", hbigSq.data(), hbigSq.data() + hbigSq.size());
  CHECK(hbigSq == expectSq);

  // J: a vertex reading four variables interleaved along two inner axes (as a strided
  // convolution's input gradient joins its phases): element (t1, a1, t2, a2) is phase[a1][a2]
  // at (t1, t2); a run of one element per phase in turn, a row at a time
  {
    Graph g2(target);
    g2.addCodelets("tutorial.gp");
    constexpr unsigned T1 = 3, T2 = 7;
    std::vector<Tensor> rows;
    std::vector<std::vector<float>> hphase(4, std::vector<float>(T1 * T2));
    for (unsigned a1 = 0; a1 < 2; ++a1) {
      std::vector<Tensor> cols;
      for (unsigned a2 = 0; a2 < 2; ++a2) {
        const unsigned p = a1 * 2 + a2;
        Tensor v = g2.addVariable(FLOAT, {T1, T2}, "phase" + std::to_string(p));
        g2.setTileMapping(v, 5);
        g2.createHostWrite("phase" + std::to_string(p), v);
        for (unsigned i = 0; i < T1 * T2; ++i) hphase[p][i] = float(p * 100 + i);
        cols.push_back(v.reshape({T1, 1, T2, 1}));
      }
      rows.push_back(concat(cols, 3));
    }
    Tensor joined = concat(rows, 1).reshape({T1 * 2, T2 * 2});
    Tensor sq = g2.addVariable(FLOAT, {T1 * 2 * T2 * 2}, "joinedSq");
    g2.setTileMapping(sq, 5);
    g2.createHostRead("joinedSq", sq);
    ComputeSet cs = g2.addComputeSet("squareJoined");
    // one vertex over all of it, one over an odd part starting mid-row
    VertexRef whole = g2.addVertex(cs, "tg::Square");
    g2.connect(whole["in"], joined.flatten().slice(0, 40));
    g2.connect(whole["out"], sq.slice(0, 40));
    g2.setTileMapping(whole, 5);
    VertexRef rest = g2.addVertex(cs, "tg::Square");
    g2.connect(rest["in"], joined.flatten().slice(40, T1 * 2 * T2 * 2));
    g2.connect(rest["out"], sq.slice(40, T1 * 2 * T2 * 2));
    g2.setTileMapping(rest, 5);
    Engine e2(g2, Sequence({Execute(cs)}));
    e2.load(device);
    for (unsigned p = 0; p < 4; ++p)
      e2.writeTensor("phase" + std::to_string(p), hphase[p].data(), hphase[p].data() + T1 * T2);
    e2.run(0);
    std::vector<float> got(T1 * 2 * T2 * 2), expect(got.size());
    for (unsigned h = 0; h < T1 * 2; ++h)
      for (unsigned w = 0; w < T2 * 2; ++w) {
        const float x = hphase[(h % 2) * 2 + w % 2][(h / 2) * T2 + w / 2];
        expect[h * T2 * 2 + w] = x * x;
      }
    e2.readTensor("joinedSq", got.data(), got.data() + got.size());
    CHECK_VEC(got, expect);
  }

  std::ostringstream summary;
  engine.printProfileSummary(summary);
  CHECK(summary.str().find("Vertices:") != std::string::npos);
  return check::finish("tutorial");
}
