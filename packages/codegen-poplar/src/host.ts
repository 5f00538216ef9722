/**
 * Fixed parts of host.cpp: includes, helpers used by the generated graph functions, and the
 * stdin/stdout protocol the runtime speaks with the executable (see codegen-design: "The host
 * program protocol"). The Precision options that set the tiles' floating-point behaviour add a
 * few lines (HostNumerics); without them the text is fixed.
 */

/** The Precision options the host program sets on the tiles (PopART does the same calls). */
export interface HostNumerics {
  /** Precision.enableStochasticRounding: seeded from the run seed, continued across runs. */
  readonly stochasticRounding: boolean;
  /** Precision.enableFloatingPointExceptions: traps on invalid operations, division by zero and overflow. */
  readonly floatingPointExceptions: boolean;
}

const NO_NUMERICS: HostNumerics = { stochasticRounding: false, floatingPointExceptions: false };

export const HOST_INCLUDES = `#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/Graph.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Program.hpp>
#include <poplar/Target.hpp>
#include <popops/Cast.hpp>
#include <popops/DynamicSlice.hpp>
#include <popops/Fill.hpp>
#include <popops/Reduce.hpp>
#include <popops/Zero.hpp>
#include <popops/codelets.hpp>
#include <poplin/ConvParams.hpp>
#include <poplin/Convolution.hpp>
#include <poplin/MatMul.hpp>
#include <poplin/codelets.hpp>
#include <poputil/TileMapping.hpp>
#include <gcl/Collectives.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>
#include <unistd.h>`;

export function hostIncludes(n: HostNumerics = NO_NUMERICS): string {
  const extra: string[] = [];
  if (n.floatingPointExceptions || n.stochasticRounding) extra.push('#include <poplar/CSRFunctions.hpp>');
  if (n.stochasticRounding) extra.push('#include <poprand/RandomGen.hpp>', '#include <poprand/codelets.hpp>');
  if (!extra.length) return HOST_INCLUDES;
  return HOST_INCLUDES.replace('#include <poplar/DeviceManager.hpp>\n', `${extra.join('\n')}\n#include <poplar/DeviceManager.hpp>\n`);
}

const HOST_HELPERS_TEMPLATE = String.raw`// The module's device state, streams and per-IPU virtual graphs.
struct Device {
  poplar::Graph &graph;
  std::vector<poplar::Graph> ipu;
  std::vector<poplar::Tensor> state;
  std::vector<poplar::Tensor> inputs;
  std::vector<poplar::DataStream> inFifo;
  std::vector<poplar::DataStream> outFifo;
  poplar::Tensor seed;
  poplar::Tensor step;
  // remote buffers of off-chip state, by state index
  std::map<std::size_t, poplar::RemoteBuffer> remote;
};

// A tensor spread over the tiles of a (virtual) graph in runs of whole grains, from tile
// offset on (the generator staggers small tensors so that they do not pile up on tile 0).
poplar::Tensor newTensor(poplar::Graph &g, const poplar::Type &type, const std::vector<std::size_t> &shape,
                         unsigned grain, unsigned minElementsPerTile, unsigned offset, const std::string &name) {
  poplar::Tensor t = g.addVariable(type, shape, name);
  poputil::mapTensorLinearlyWithOffset(g, t, minElementsPerTile, grain, offset);
  return t;
}

// x broadcast to shape (NumPy rules) as a view.
poplar::Tensor broadcastTo(poplar::Tensor x, const std::vector<std::size_t> &shape) {
  std::vector<std::size_t> s(shape.size() - x.rank(), 1);
  for (std::size_t d : x.shape()) s.push_back(d);
  x = x.reshape(s);
  for (unsigned d = 0; d < shape.size(); ++d) {
    if (x.shape()[d] != shape[d]) x = x.broadcast(unsigned(shape[d]), d);
  }
  return x;
}

// The single element of a one-element tensor, for a scalar vertex field.
poplar::Tensor scalarOf(const poplar::Tensor &t) { return t.flatten()[0]; }

// Calls f(tile, begin, end) for every contiguous region of t's tile mapping (t is flat).
template <typename F> void forEachRegion(poplar::Graph &g, const poplar::Tensor &t, F f) {
  const auto mapping = g.getTileMapping(t);
  for (unsigned tile = 0; tile < mapping.size(); ++tile) {
    for (const auto &region : mapping[tile]) f(tile, std::size_t(region.begin()), std::size_t(region.end()));
  }
}

// A rough cycle estimate for a generated vertex (IPU Model profiles need one): a fixed start-up
// cost plus perElement cycles per element, shared by the six workers of the tile.
void setCycles(poplar::Graph &g, poplar::VertexRef v, std::size_t elements, unsigned perElement) {
  g.setPerfEstimate(v, 50 + (std::uint64_t(elements) * perElement + 5) / 6);
}

// The device the options chose (kDeviceKind): IPU hardware (a given id, or the first free device
// of kDeviceIpus IPUs), the IPU Model, or none (an offline target: the graph is compiled only).
poplar::Device attachDevice() {
  if (kDeviceKind == kIpuModel) {
    poplar::IPUModel model(kIpuArch);
    model.numIPUs = kDeviceIpus;
    return model.createDevice();
  }
  auto manager = poplar::DeviceManager::createDeviceManager();
  if (kIpuId >= 0) {
    auto device = manager.getDevice(unsigned(kIpuId));
    if (device.attach()) return device;
    throw std::runtime_error("the IPU device with id " + std::to_string(kIpuId) + " could not be attached (in use?)");
  }
  auto devices = manager.getDevices(poplar::TargetType::IPU, kDeviceIpus);
  for (auto &device : devices) {
    if (device.attach()) return std::move(device);
  }
  throw std::runtime_error("no device with " + std::to_string(kDeviceIpus) + " IPUs could be attached");
}

// ---- the protocol (commands on stdin, answers on the original stdout) ----

bool readLine(std::string &line) {
  line.clear();
  for (;;) {
    const int c = std::fgetc(stdin);
    if (c == EOF) return !line.empty();
    if (c == '\n') return true;
    line.push_back(char(c));
    if (line.size() > 100000) throw std::runtime_error("protocol: command line too long");
  }
}

void readExact(char *data, std::size_t n) {
  if (n > 0 && std::fread(data, 1, n, stdin) != n) throw std::runtime_error("protocol: input ended inside a payload");
}

std::vector<std::string> words(const std::string &line) {
  std::vector<std::string> out;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && line[i] == ' ') ++i;
    std::size_t j = i;
    while (j < line.size() && line[j] != ' ') ++j;
    if (j > i) out.push_back(line.substr(i, j - i));
    i = j;
  }
  return out;
}

std::size_t parseSize(const std::string &s) {
  if (s.empty() || s.size() > 18 || s.find_first_not_of("0123456789") != std::string::npos) {
    throw std::runtime_error("protocol: bad byte count '" + s.substr(0, 20) + "'");
  }
  return std::size_t(std::stoull(s));
}

void writeAll(std::FILE *out, const void *data, std::size_t n) {
  if (n > 0 && std::fwrite(data, 1, n, out) != n) throw std::runtime_error("protocol: cannot write the answer");
}

// The state index of handle "v<i>", or kStateBytes.size() when it names no state.
std::size_t stateIndex(const std::string &handle) {
  if (handle.size() > 1 && handle[0] == 'v' && handle.find_first_not_of("0123456789", 1) == std::string::npos && handle.size() < 10) {
    const std::size_t i = std::size_t(std::stoul(handle.substr(1)));
    if (i < kStateBytes.size()) return i;
  }
  return kStateBytes.size();
}

// Bytes per replica of a host read/write handle ("v<i>" for state i, "seed", "step").
std::size_t handleBytes(const std::string &handle) {
  if (handle == "seed" || handle == "step") return 4;
  const std::size_t i = stateIndex(handle);
  if (i < kStateBytes.size()) {
    if (kStateStorage[i] == kTransient) throw std::runtime_error("protocol: '" + handle + "' is a transient working copy, which the host cannot access");
    return kStateBytes[i];
  }
  throw std::runtime_error("protocol: unknown handle '" + handle.substr(0, 40) + "'");
}

// Off-chip state moves through its remote buffer, one row per replica; the rest through host handles.
bool isRemote(const std::string &handle) {
  const std::size_t i = stateIndex(handle);
  return i < kStateBytes.size() && kStateStorage[i] == kOffChip;
}

void serve(poplar::Engine &engine, std::FILE *out) {
  std::vector<std::vector<char>> inBuf(kInputBytes.size()), outBuf(kOutputBytes.size());/*RESEED_STATE*/
  for (std::size_t i = 0; i < inBuf.size(); ++i) {
    inBuf[i].resize(kInputBytes[i]);
    if (kInputBytes[i] > 0) engine.connectStream("in" + std::to_string(i), inBuf[i].data(), inBuf[i].data() + inBuf[i].size());
  }
  for (std::size_t i = 0; i < outBuf.size(); ++i) {
    outBuf[i].resize(kOutputBytes[i]);
    if (kOutputBytes[i] > 0) engine.connectStream("out" + std::to_string(i), outBuf[i].data(), outBuf[i].data() + outBuf[i].size());
  }
  std::string line;
  while (readLine(line)) {
    const std::vector<std::string> w = words(line);
    if (w.empty()) continue;
    if (w[0] == "quit" && w.size() == 1) return;
    if (w[0] == "write" && w.size() == 3) {
      const std::size_t n = parseSize(w[2]);
      const std::size_t want = handleBytes(w[1]) * kReplicas;
      if (n != want) throw std::runtime_error("write " + w[1] + ": expected " + std::to_string(want) + " bytes, got " + std::to_string(n));
      std::vector<char> buf(n);
      readExact(buf.data(), n);
      if (isRemote(w[1])) {
        for (unsigned r = 0; r < kReplicas; ++r) engine.copyToRemoteBuffer(buf.data() + r * (n / kReplicas), w[1] + ".remote", 0, r);
      } else {
        engine.writeTensor(w[1] + ".w", buf.data(), buf.data() + n);
      }/*RESEED_ON_WRITE*/
      writeAll(out, "ok\n", 3);
    } else if (w[0] == "read" && w.size() == 2) {
      const std::size_t n = handleBytes(w[1]) * kReplicas;
      std::vector<char> buf(n);
      if (isRemote(w[1])) {
        for (unsigned r = 0; r < kReplicas; ++r) engine.copyFromRemoteBuffer(w[1] + ".remote", buf.data() + r * (n / kReplicas), 0, r);
      } else {
        engine.readTensor(w[1] + ".r", buf.data(), buf.data() + n);
      }
      const std::string head = "ok " + std::to_string(n) + "\n";
      writeAll(out, head.data(), head.size());
      writeAll(out, buf.data(), n);
    } else if (w[0] == "run" && w.size() == 1 + kInputBytes.size()) {
      for (std::size_t i = 0; i < inBuf.size(); ++i) {
        const std::size_t n = parseSize(w[1 + i]);
        if (n != kInputBytes[i]) {
          throw std::runtime_error("run: input stream " + std::to_string(i) + " needs " + std::to_string(kInputBytes[i]) + " bytes, got " + std::to_string(n));
        }
      }
      for (auto &b : inBuf) readExact(b.data(), b.size());/*RESEED_ON_RUN*/
      engine.run(0);
      std::string head = "ok";
      for (const auto &b : outBuf) head += " " + std::to_string(b.size());
      head += "\n";
      writeAll(out, head.data(), head.size());
      for (const auto &b : outBuf) writeAll(out, b.data(), b.size());
    } else {
      throw std::runtime_error("protocol: unknown command '" + line.substr(0, 60) + "'");
    }
    std::fflush(out);
  }
}`;

// serve() with a seed program: program 1 seeds the tiles' generators from the run seed before
// the first run after the seed is written; later runs continue their sequences.
const RESEED: Record<string, string> = {
  '/*RESEED_STATE*/': '\n  bool reseed = true;  // run program 1 (seeding stochastic rounding) before the next run',
  '/*RESEED_ON_WRITE*/': '\n      if (w[1] == "seed") reseed = true;',
  '/*RESEED_ON_RUN*/': '\n      if (reseed) {\n        engine.run(1);\n        reseed = false;\n      }',
};

export function hostHelpers(n: HostNumerics = NO_NUMERICS): string {
  let out = HOST_HELPERS_TEMPLATE;
  for (const [mark, text] of Object.entries(RESEED)) out = out.replace(mark, n.stochasticRounding ? text : '');
  return out;
}

export const HOST_HELPERS = hostHelpers();

const HOST_MAIN_TEMPLATE = String.raw`int main(int argc, char **argv) {
  try {
    // answers go to the original stdout; anything else written to stdout goes to stderr
    const int protocolFd = dup(1);
    if (protocolFd < 0 || dup2(2, 1) < 0) throw std::runtime_error("cannot set up the protocol channel");
    std::FILE *out = fdopen(protocolFd, "wb");
    if (out == nullptr) throw std::runtime_error("cannot open the protocol channel");
    const char *codelets = argc > 1 ? argv[1] : "codelets.gp";

    // an offline target compiles the graph and runs nothing (connectionType Never)
    poplar::Device device = kDeviceKind == kOffline ? poplar::Device() : attachDevice();
    const poplar::Target target = kDeviceKind == kOffline ? poplar::Target::createIPUTarget(kDeviceIpus, kIpuArch) : device.getTarget();
    poplar::Graph graph(target, poplar::replication_factor(kReplicas));
    popops::addCodelets(graph);
    poplin::addCodelets(graph);/*NUMERICS_CODELETS*/
    graph.addCodelets(codelets);
    Device d{graph, {}, {}, {}, {}, {}, {}, {}, {}};
    const unsigned tilesPerIpu = graph.getTarget().getTilesPerIPU();
    for (unsigned i = 0; i < kIpus; ++i) d.ipu.push_back(graph.createVirtualGraph(i * tilesPerIpu, (i + 1) * tilesPerIpu));
    declare(d);
/*NUMERICS_PROGRAM*/
    if (kDeviceKind == kOffline) {
      std::fprintf(stderr, "compiled for an offline %s target of %u IPUs; nothing runs without a device (connectionType Never)\n", kIpuArch, kDeviceIpus);
      return 0;
    }
    engine.load(device);
    serve(engine, out);
    std::fflush(out);
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}`;

/** main(): the plain program, or with the Precision options' calls in front (and a seed program). */
export function hostMain(n: HostNumerics = NO_NUMERICS): string {
  const codelets = n.stochasticRounding ? '\n    poprand::addCodelets(graph);' : '';
  const lines: string[] = [];
  if (!n.stochasticRounding && !n.floatingPointExceptions) {
    lines.push('    poplar::program::Sequence program = buildProgram(d);', '    poplar::Engine engine(graph, {program});');
  } else {
    lines.push('    // the Precision options, set on every tile at the start of each run', '    poplar::program::Sequence program;');
    if (n.floatingPointExceptions) {
      lines.push('    poplar::setFloatingPointBehaviour(graph, program, poplar::FloatingPointBehaviour(true, true, true, false, true), "floating-point exceptions");');
    }
    if (n.stochasticRounding) lines.push('    poplar::setStochasticRounding(graph, program, true, "stochastic rounding");');
    lines.push('    program.add(buildProgram(d));');
    if (n.stochasticRounding) {
      lines.push(
        '    // program 1 seeds the generators stochastic rounding draws from with the run seed',
        '    poplar::program::Sequence seedProgram;',
        '    poprand::setSeed(graph, poplar::concat(d.seed.reshape({1}), d.step.reshape({1})), 0, seedProgram, "stochastic rounding seed");',
        '    poplar::Engine engine(graph, {program, seedProgram});',
      );
    } else {
      lines.push('    poplar::Engine engine(graph, {program});');
    }
  }
  return HOST_MAIN_TEMPLATE.replace('/*NUMERICS_CODELETS*/', codelets).replace('/*NUMERICS_PROGRAM*/', lines.join('\n'));
}

export const HOST_MAIN = hostMain();

/** The helper of pipeline stashes (emitted only for modules that stash). */
export const RING_HELPER = String.raw`// Advances a ring buffer's counter (a scalar) modulo the ring's depth, on the counter's tile.
void advanceRing(poplar::Graph &g, const poplar::Tensor &counter, unsigned depth, const std::string &vertex,
                 poplar::program::Sequence &prog) {
  const auto mapping = g.getTileMapping(counter);
  unsigned tile = 0;
  while (tile + 1 < mapping.size() && mapping[tile].empty()) ++tile;
  poplar::Tensor d = g.addConstant<unsigned>(poplar::UNSIGNED_INT, {}, depth, "ring depth");
  g.setTileMapping(d, tile);
  poplar::ComputeSet cs = g.addComputeSet("ring advance");
  poplar::VertexRef v = g.addVertex(cs, vertex, {{"index", counter}, {"depth", d}});
  g.setTileMapping(v, tile);
  prog.add(poplar::program::Execute(cs));
}`;
