// Engine profiling: the autoReport.* engine options (given to the Engine or in
// POPLAR_ENGINE_OPTIONS) make the engine write profile.json into autoReport.directory, with
// the compiled graph at load and what replica 0 measured after every run.
// codelets: codelets/tutorial.cpp
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/exceptions.hpp>
#include <poplin/MatMul.hpp>
#include <poplin/codelets.hpp>

#include "check.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace poplar;
using namespace poplar::program;
namespace fs = std::filesystem;

namespace {

constexpr unsigned kIterations = 3;
constexpr std::uint64_t kVertexCycles = 20, kSyncCycles = 100;

std::string readFile(const fs::path &p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The number after the first `"key": ` at or after `from` (npos when missing).
double numberAfter(const std::string &text, const std::string &key, std::size_t from = 0) {
  const std::string k = "\"" + key + "\": ";
  const auto at = text.find(k, from);
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + k.size(), nullptr);
}

/// The elements of the first `"key": [[...]]` list of lists after `from`: the sizes of the inner lists.
std::vector<std::size_t> innerSizes(const std::string &text, const std::string &key, std::size_t from) {
  const std::string k = "\"" + key + "\": [";
  auto at = text.find(k, from);
  std::vector<std::size_t> out;
  if (at == std::string::npos) return out;
  at += k.size();
  while (at < text.size() && text[at] == '[') {
    const auto end = text.find(']', at);
    const std::string inner = text.substr(at + 1, end - at - 1);
    out.push_back(inner.empty() ? 0 : 1 + static_cast<std::size_t>(std::count(inner.begin(), inner.end(), ',')));
    at = end + 1;
    while (at < text.size() && (text[at] == ',' || text[at] == ' ')) ++at;
  }
  return out;
}

/// x (4 floats) streamed in, summed by four vertices into y (each its own tile), y streamed
/// out, and a small matmul (a PopLibs step), kIterations times per run.
struct Model {
  Graph graph;
  Sequence program;
  explicit Model(const Target &target) : graph(target) {
    graph.addCodelets("tutorial.gp");
    poplin::addCodelets(graph);
    Tensor x = graph.addVariable(FLOAT, {4}, "x");
    Tensor y = graph.addVariable(FLOAT, {4}, "y");
    ComputeSet cs = graph.addComputeSet("sum");
    for (unsigned i = 0; i < 4; ++i) {
      graph.setTileMapping(x[i], i);
      graph.setTileMapping(y[i], i);
      VertexRef v = graph.addVertex(cs, "SumVertex");
      graph.connect(v["in"], x.slice(0, i + 1));
      graph.connect(v["out"], y[i]);
      graph.setTileMapping(v, i);
      graph.setPerfEstimate(v, kVertexCycles);
    }
    auto in = graph.addHostToDeviceFIFO("x-in", FLOAT, 4);
    auto out = graph.addDeviceToHostFIFO("y-out", FLOAT, 4);
    Sequence body;
    body.add(Copy(in, x));
    body.add(Execute(cs));
    poplin::matMul(graph, x.reshape({2, 2}), x.reshape({2, 2}), body, FLOAT, "product");
    body.add(Copy(y, out));
    program.add(Repeat(kIterations, body));
  }
};

struct Streams {
  std::vector<float> in = std::vector<float>(4 * kIterations, 1.0f), out = std::vector<float>(4 * kIterations);
  void connect(Engine &e) {
    e.connectStream("x-in", in.data(), in.data() + in.size());
    e.connectStream("y-out", out.data(), out.data() + out.size());
  }
};

fs::path freshDir(const char *name) {
  const fs::path dir = fs::temp_directory_path() / (std::string("poplar-host-profile-") + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  return dir;
}

} // namespace

int main() {
  IPUModel ipuModel;
  ipuModel.tilesPerIPU = 8;
  Device device = ipuModel.createDevice();
  const Target target = device.getTarget();

  // No autoReport options: nothing is written.
  {
    const fs::path dir = freshDir("off");
    Model m(target);
    Engine e(m.graph, m.program);
    Streams s;
    e.load(device);
    s.connect(e);
    e.run(0);
    CHECK(!fs::exists(dir));
    CHECK(!fs::exists("profile.json"));
  }

  // autoReport.all through the Engine's options: the graph at load, then each run.
  {
    const fs::path dir = freshDir("all") / "nested";
    Model m(target);
    Engine e(m.graph, m.program, OptionFlags{{"autoReport.all", "true"}, {"autoReport.directory", dir.string()}});
    Streams s;
    e.load(device);
    const fs::path file = dir / "profile.json";
    CHECK(fs::exists(file));
    std::string text = readFile(file);
    CHECK(text.find("\"format\": \"poplar-host-profile\"") != std::string::npos);
    CHECK_EQ(numberAfter(text, "version"), 1.0);
    CHECK_EQ(numberAfter(text, "tilesPerIpu"), 8.0);
    CHECK(text.find("\"name\": \"sum\"") != std::string::npos);
    // the slowest tile's estimates plus a sync
    CHECK_EQ(numberAfter(text, "estimatedCycles", text.find("\"computeSets\"")), double(kVertexCycles + kSyncCycles));
    CHECK(text.find("\"kind\": \"poplibs\", \"name\": \"product") != std::string::npos);
    CHECK_EQ(numberAfter(text, "runs"), 0.0);
    CHECK(text.find("\"lastRun\": null") != std::string::npos);

    s.connect(e);
    e.run(0);
    e.run(0);
    text = readFile(file);
    CHECK_EQ(numberAfter(text, "runs"), 2.0);
    const auto last = text.find("\"lastRun\"");
    CHECK(last != std::string::npos);
    CHECK_EQ(numberAfter(text, "run", last), 2.0);
    // one execution of the compute set per iteration
    const auto cs = text.find("\"computeSets\"", last);
    CHECK_EQ(numberAfter(text, "executions", cs), double(kIterations));
    CHECK_EQ(numberAfter(text, "estimatedCycles", cs), double(kIterations * (kVertexCycles + kSyncCycles)));
    CHECK(numberAfter(text, "seconds", cs) >= 0.0);
    // the run's cycles also count the matmul's estimate
    CHECK(numberAfter(text, "estimatedCycles", last) > double(kIterations * (kVertexCycles + kSyncCycles)));
    CHECK_EQ(numberAfter(text, "copies", text.find("\"hostToDevice\"", last)), double(kIterations));
    CHECK_EQ(numberAfter(text, "bytes", text.find("\"hostToDevice\"", last)), 16.0 * kIterations);
    CHECK_EQ(numberAfter(text, "copies", text.find("\"deviceToHost\"", last)), double(kIterations));
    // a timestamp per copy: PopTorch's perf counters
    CHECK(text.find("\"inputStreams\": [\"x-in\"]", last) != std::string::npos);
    CHECK_VEC(innerSizes(text, "input", last), std::vector<std::size_t>{kIterations});
    CHECK_VEC(innerSizes(text, "input_complete", last), std::vector<std::size_t>{kIterations});
    CHECK_VEC(innerSizes(text, "output", last), std::vector<std::size_t>{kIterations});
    CHECK_VEC(innerSizes(text, "output_complete", last), std::vector<std::size_t>{kIterations});
    // totals over both runs
    const auto totals = text.find("\"totals\"");
    CHECK_EQ(numberAfter(text, "executions", text.find("\"computeSets\"", totals)), 2.0 * kIterations);
    // runs are measured only while execution profiling is enabled; a reset starts again
    e.disableExecutionProfiling();
    e.run(0);
    CHECK_EQ(numberAfter(readFile(file), "runs"), 2.0);
    e.enableExecutionProfiling();
    e.run(0);
    CHECK_EQ(numberAfter(readFile(file), "runs"), 3.0);
    e.resetExecutionProfile();
    text = readFile(file);
    CHECK_EQ(numberAfter(text, "runs"), 0.0);
    CHECK(text.find("\"lastRun\": null") != std::string::npos);
    // no temporary file is left behind
    std::size_t files = 0;
    for (const auto &entry : fs::directory_iterator(dir)) files += entry.is_regular_file();
    CHECK_EQ(files, std::size_t(1));
    fs::remove_all(dir.parent_path());
  }

  // POPLAR_ENGINE_OPTIONS turns it on too, and applies over the program's options.
  {
    const fs::path dir = freshDir("env");
    const std::string env = "{\"autoReport.outputGraphProfile\": \"true\", \"autoReport.directory\": \"" + dir.string() + "\"}";
    setenv("POPLAR_ENGINE_OPTIONS", env.c_str(), 1);
    Model m(target);
    Engine e(m.graph, m.program, OptionFlags{{"autoReport.directory", "elsewhere"}});
    Streams s;
    e.load(device);
    s.connect(e);
    e.run(0);
    const std::string text = readFile(dir / "profile.json");
    // the graph profile only: runs are not measured
    CHECK(text.find("\"execution\": null") != std::string::npos);
    CHECK(!fs::exists("elsewhere"));
    unsetenv("POPLAR_ENGINE_OPTIONS");
    fs::remove_all(dir);
  }

  // Without a profiler execution profiling cannot be enabled (disabling and resetting do nothing).
  {
    Model m(target);
    Engine e(m.graph, m.program);
    e.disableExecutionProfiling();
    e.resetExecutionProfile();
    CHECK_THROWS(poplar::runtime_error, e.enableExecutionProfiling(), "autoReport.all");
  }

  // A value that is not true or false is refused.
  {
    Model m(target);
    CHECK_THROWS(poplar::invalid_option, Engine(m.graph, m.program, OptionFlags{{"autoReport.all", "yes"}}),
                 "autoReport.all");
  }

  return check::finish("profile");
}
