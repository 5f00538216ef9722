// tilegraph's host support library (see tilegraph_host.hpp): built once per toolchain and linked
// into every generated host program.
#include "tilegraph_host.hpp"

#include <algorithm>

#include <poplar/CSRFunctions.hpp>
#include <poplar/DeviceManager.hpp>
#include <poplar/Engine.hpp>
#include <poplar/IPUModel.hpp>
#include <poplar/Target.hpp>
#include <poplin/codelets.hpp>
#include <popnn/codelets.hpp>
#include <popops/codelets.hpp>
#include <poprand/RandomGen.hpp>
#include <poprand/codelets.hpp>
#include <poputil/TileMapping.hpp>

#include <cstdio>
#include <cstring>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <utility>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace tilegraph {

// A tensor spread over the tiles of a (virtual) graph in runs of whole grains, from tile
// offset on (the generator staggers small tensors so that they do not pile up on tile 0).
poplar::Tensor newTensor(poplar::Graph &g, const poplar::Type &type, const std::vector<std::size_t> &shape,
                         unsigned grain, unsigned minElementsPerTile, unsigned offset, const std::string &name) {
  poplar::Tensor t = g.addVariable(type, shape, name);
  poputil::mapTensorLinearlyWithOffset(g, t, minElementsPerTile, grain, offset);
  return t;
}

namespace {
void connectPeriodic(poplar::Graph &g, poplar::VertexRef v, const RegionField &f, std::size_t b, std::size_t e) {
  const std::size_t firstRun = b / f.periodInner, lastRun = (e - 1) / f.periodInner;
  const bool wraps = firstRun / f.periodSize != lastRun / f.periodSize;
  const std::size_t from = wraps ? 0 : firstRun % f.periodSize, to = wraps ? f.periodSize : lastRun % f.periodSize + 1;
  g.connect(v[f.name], f.t.slice(from, to));
  g.setInitialValue(v[std::string(f.name) + "From"], unsigned(from));
  // where the vertex's first output is in the period, so its workers divide only to cross a run
  g.setInitialValue(v[std::string(f.name) + "At"], unsigned(firstRun % f.periodSize));
  if (f.periodInner > 1) g.setInitialValue(v[std::string(f.name) + "Along"], unsigned(b % f.periodInner));
  g.setInitialValue(v[std::string(f.name) + "Inner"], unsigned(f.periodInner));
  g.setInitialValue(v[std::string(f.name) + "Size"], unsigned(f.periodSize));
}
} // namespace

void addRegionVertices(poplar::Graph &g, const poplar::ComputeSet &cs, const char *vertex,
                       const poplar::Tensor &over, std::initializer_list<RegionField> fields, unsigned cyclesPerElement) {
  forEachRegion(g, over, [&](unsigned tile, std::size_t b, std::size_t e) {
    poplar::VertexRef v = g.addVertex(cs, vertex);
    for (const RegionField &f : fields) {
      if (f.periodSize) {
        connectPeriodic(g, v, f, b, e);
        continue;
      }
      g.connect(v[f.name], f.whole ? f.t : f.t.slice(b, e));
      if (f.mapHere) g.setTileMapping(f.t.slice(b, e), tile);
    }
    g.setTileMapping(v, tile);
    setCycles(g, v, e - b, cyclesPerElement);
  });
}

namespace {
std::size_t elementsOf(const std::vector<std::size_t> &shape) {
  std::size_t n = 1;
  for (std::size_t x : shape) n *= x;
  return n;
}

poplar::Tensor declared(Device &d, const TensorSpec &s, std::size_t i, const std::map<std::size_t, poplar::Tensor> &made) {
  auto it = made.find(i);
  if (it != made.end()) return it->second;
  const unsigned bytes = d.graph.getTarget().getTypeSize(s.type);
  const unsigned grain = std::max(1u, 8 / bytes);
  return newTensor(d.ipu[s.ipu], s.type, s.shape, grain, std::max(grain, 128 / bytes), s.offset, s.name);
}
TensorSpec specOf(const TensorTable &table, std::size_t i) {
  const TensorRow &r = table.rows[i];
  return TensorSpec{r.name, table.types.at(r.type), table.shapes.at(r.shape), r.ipu, r.offset, r.storage};
}
} // namespace

void declareState(Device &d, const TensorTable &table, const std::map<std::size_t, poplar::Tensor> &made) {
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    const TensorSpec s = specOf(table, i);
    d.state.push_back(declared(d, s, i, made));
    d.stateBytes.push_back(elementsOf(s.shape) * d.graph.getTarget().getTypeSize(s.type));
    d.stateStorage.push_back(s.storage);
    const std::string handle = "v" + std::to_string(i);
    if (s.storage == kOnChip) {
      d.graph.createHostWrite(handle + ".w", d.state[i]);
      d.graph.createHostRead(handle + ".r", d.state[i]);
    } else if (s.storage == kOffChip) {
      d.remote.emplace(i, d.graph.addRemoteBuffer(handle + ".remote", s.type, elementsOf(s.shape), 1));
    }
  }
}

void declareInputs(Device &d, const TensorTable &table, const std::map<std::size_t, poplar::Tensor> &made) {
  for (std::size_t i = 0; i < table.rows.size(); ++i) {
    const TensorSpec s = specOf(table, i);
    d.inputs.push_back(declared(d, s, i, made));
    d.inFifo.push_back(d.graph.addHostToDeviceFIFO("in" + std::to_string(i), s.type, elementsOf(s.shape)));
  }
}

void declareIoBuffers(Device &d, const std::vector<IoBufferSpec> &specs) {
  for (const IoBufferSpec &s : specs) {
    const TensorSpec &t = s.tensor;
    const unsigned bytes = d.graph.getTarget().getTypeSize(t.type);
    const unsigned grain = std::max(1u, 8 / bytes);
    poplar::Tensor buffer = newTensor(d.io.at(t.ipu), t.type, t.shape, grain, std::max(grain, 128 / bytes), t.offset, std::string(t.name) + ".io");
    (s.kind == kIoInput ? d.ioInputs : s.kind == kIoOutput ? d.ioOutputs : d.ioRemote).emplace(s.index, buffer);
  }
}

std::vector<poplar::Tensor> callFunction(poplar::Graph &g, poplar::program::Sequence &prog, const OutlinedFunction &f,
                                         std::initializer_list<TensorRef> args, const char *name) {
  for (std::size_t i = 0; i < f.params.size(); ++i) prog.add(poplar::program::Copy(args.begin()[i].t, f.params[i]));
  prog.add(poplar::program::Call(f.function, name));
  std::vector<poplar::Tensor> out;
  out.reserve(f.results.size());
  for (const poplar::Tensor &r : f.results) {
    out.push_back(g.clone(r, name));
    prog.add(poplar::program::Copy(r, out.back()));
  }
  return out;
}

void writeStates(Device &d, poplar::program::Sequence &prog, const std::vector<poplar::Tensor> &results,
                 std::initializer_list<std::pair<std::size_t, std::size_t>> writes) {
  for (const auto &w : writes) prog.add(poplar::program::Copy(results.at(w.first), d.state.at(w.second)));
}

// poplin's parameters of a 2-D convolution: field, kernel, channels per group and groups, with
// the padding, kernel dilation and output stride transforms.
poplin::ConvParams convParams(const poplar::Type &type, std::size_t batch, std::vector<std::size_t> field,
                              std::vector<std::size_t> kernel, std::size_t inChansPerGroup,
                              std::size_t outChansPerGroup, std::size_t groups, std::vector<unsigned> padLower,
                              std::vector<unsigned> padUpper, std::vector<unsigned> dilation,
                              std::vector<unsigned> stride) {
  poplin::ConvParams p(type, batch, field, kernel, inChansPerGroup, outChansPerGroup, groups);
  p.inputTransform.paddingLower = padLower;
  p.inputTransform.paddingUpper = padUpper;
  p.kernelTransform.dilation = dilation;
  p.outputTransform.stride = stride;
  return p;
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

// A rough cycle estimate for a generated vertex (IPU Model profiles need one): a fixed start-up
// cost plus perElement cycles per element, shared by the six workers of the tile.
void setCycles(poplar::Graph &g, poplar::VertexRef v, std::size_t elements, unsigned perElement) {
  g.setPerfEstimate(v, 50 + (std::uint64_t(elements) * perElement + 5) / 6);
}

// The device the options chose (m.deviceKind): IPU hardware (a given id, or the first free device
// of m.deviceIpus IPUs), the IPU Model, or none (an offline target: the graph is compiled only).
// The options a device is requested with: the sync configuration of Options.syncPattern.
poplar::OptionFlags deviceOptions(const Module &m) {
  poplar::OptionFlags flags;
  if (*m.syncConfiguration) flags.set("syncConfiguration", m.syncConfiguration);
  return flags;
}

namespace {

poplar::Device attachDevice(const Module &m) {
  if (m.deviceKind == kIpuModel) {
    poplar::IPUModel model(m.ipuArch);
    model.numIPUs = m.deviceIpus;
    return model.createDevice();
  }
  auto manager = poplar::DeviceManager::createDeviceManager();
  if (m.ipuId >= 0) {
    auto device = manager.getDevice(unsigned(m.ipuId), deviceOptions(m));
    if (device.attach()) return device;
    throw std::runtime_error("the IPU device with id " + std::to_string(m.ipuId) + " could not be attached (in use?)");
  }
  auto devices = manager.getDevices(poplar::TargetType::IPU, m.deviceIpus, deviceOptions(m));
  for (auto &device : devices) {
    if (device.attach()) return std::move(device);
  }
  throw std::runtime_error("no device with " + std::to_string(m.deviceIpus) + " IPUs could be attached");
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

// The state index of handle "v<i>", or d.stateBytes.size() when it names no state.
std::size_t stateIndex(const Device &d, const std::string &handle) {
  if (handle.size() > 1 && handle[0] == 'v' && handle.find_first_not_of("0123456789", 1) == std::string::npos && handle.size() < 10) {
    const std::size_t i = std::size_t(std::stoul(handle.substr(1)));
    if (i < d.stateBytes.size()) return i;
  }
  return d.stateBytes.size();
}

// Bytes per replica of a host read/write handle ("v<i>" for state i, "seed", "step").
std::size_t handleBytes(const Device &d, const std::string &handle) {
  if (handle == "seed" || handle == "step") return 4;
  const std::size_t i = stateIndex(d, handle);
  if (i < d.stateBytes.size()) {
    if (d.stateStorage[i] == kTransient) throw std::runtime_error("protocol: '" + handle + "' is a transient working copy, which the host cannot access");
    return d.stateBytes[i];
  }
  throw std::runtime_error("protocol: unknown handle '" + handle.substr(0, 40) + "'");
}

// Off-chip state moves through its remote buffer, one row per replica; the rest through host handles.
bool isRemote(const Device &d, const std::string &handle) {
  const std::size_t i = stateIndex(d, handle);
  return i < d.stateBytes.size() && d.stateStorage[i] == kOffChip;
}

// "runfeed": every output copy is also sent as the device produces it, as "feed <stream>
// <replica> <bytes>" and the bytes, so the host reads a run's outputs while it goes on (an
// outfeed). `perCopy`: bytes of one copy of each output stream on one replica.
void connectFeeds(const Module &m, poplar::Engine &engine, std::FILE *out, std::vector<std::vector<char>> &outBuf, const std::vector<std::size_t> &perCopy,
                  std::vector<std::vector<std::size_t>> &count, std::mutex &lock) {
  for (std::size_t i = 0; i < outBuf.size(); ++i) {
    if (m.outputBytes[i] == 0) continue;
    const std::size_t per = perCopy[i];
    if (per == 0 || m.outputBytes[i] % (per * m.replicas) != 0) {
      throw std::runtime_error("runfeed: " + std::to_string(per) + " bytes per copy do not divide output stream " + std::to_string(i) + "'s " + std::to_string(m.outputBytes[i]));
    }
    count[i].assign(m.replicas, 0);
    for (unsigned r = 0; r < m.replicas; ++r) {
      engine.connectStreamToCallback("out" + std::to_string(i), r, [&m, out, &outBuf, &count, &lock, i, r, per](void *p) {
        const std::lock_guard<std::mutex> guard(lock);
        // where the circular buffer would have put it: copies in order, replicas side by side
        const std::size_t at = (count[i][r]++ * per * m.replicas) % m.outputBytes[i] + r * per;
        std::memcpy(outBuf[i].data() + at, p, per);
        const std::string head = "feed " + std::to_string(i) + " " + std::to_string(r) + " " + std::to_string(per) + "\n";
        writeAll(out, head.data(), head.size());
        writeAll(out, p, per);
        std::fflush(out);
      });
    }
  }
}

// A file the runtime writes each run's inputs into (the streams' bytes one after the other, as
// a run command would send them), mapped here once: a run's inputs then cross no pipe, which
// copied them twice in chunks of its capacity, each a wake-up of the writer.
class InputFile {
public:
  ~InputFile() {
    if (base_ != nullptr) munmap(const_cast<char *>(base_), size_);
  }
  // maps `path` (at least `bytes` long); false if it cannot
  bool open(const std::string &path, std::size_t bytes) {
    if (base_ != nullptr || bytes == 0) return false;
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    struct stat st;
    void *p = fstat(fd, &st) == 0 && std::size_t(st.st_size) >= bytes ? mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0) : MAP_FAILED;
    ::close(fd); // the mapping keeps the file
    if (p == MAP_FAILED) return false;
    base_ = static_cast<const char *>(p);
    size_ = bytes;
    return true;
  }
  const char *data() const { return base_; }

private:
  const char *base_ = nullptr;
  std::size_t size_ = 0;
};

// A run's input payload (the streams' bytes one after the other, as the run command sends them),
// read as the device asks for each copy: a run computes its first micro-batches while the later
// ones are still arriving. Whatever the device did not ask for is read by finish(). A run whose
// inputs are in the input file (startMapped) reads them from there.
class RunInputs {
public:
  RunInputs(std::vector<std::vector<char>> &bufs, unsigned replicas)
      : bufs_(bufs), stream_(bufs.size()), replicas_(replicas), count_(bufs.size(), std::vector<std::size_t>(replicas, 0)) {
    std::size_t at = 0;
    for (const auto &b : bufs_) offsets_.push_back(at), at += b.size();
  }
  // a new run's payload follows on stdin
  void start() {
    mapped_ = nullptr;
    stream_ = 0;
    at_ = 0;
    skipRead();
    for (auto &c : count_) std::fill(c.begin(), c.end(), 0);
  }
  // a new run's payload is in the input file
  void startMapped(const char *file) {
    start();
    stream_ = bufs_.size();
    mapped_ = file;
  }
  // the next copy (`per` bytes) of stream i for replica r, where the circular buffer would hold it
  // (copies in order, replicas side by side)
  void copy(std::size_t i, unsigned r, std::size_t per, void *p) {
    const std::size_t at = (count_[i][r]++ * per * replicas_) % bufs_[i].size() + r * per;
    if (mapped_ != nullptr) {
      std::memcpy(p, mapped_ + offsets_[i] + at, per);
      return;
    }
    need(i, at + per);
    std::memcpy(p, bufs_[i].data() + at, per);
  }
  // the rest of the run's payload
  void finish() {
    if (mapped_ == nullptr) need(bufs_.size(), 0);
  }

private:
  // bytes [0, end) of stream i have arrived (callbacks of different replicas may ask at once)
  void need(std::size_t i, std::size_t end) {
    const std::lock_guard<std::mutex> guard(lock_);
    while (stream_ < i) {
      readExact(bufs_[stream_].data() + at_, bufs_[stream_].size() - at_);
      ++stream_, at_ = 0;
      skipRead();
    }
    if (stream_ == i && at_ < end) {
      readExact(bufs_[i].data() + at_, end - at_);
      at_ = end;
      skipRead();
    }
  }
  void skipRead() {
    while (stream_ < bufs_.size() && at_ == bufs_[stream_].size()) ++stream_, at_ = 0;
  }
  std::vector<std::vector<char>> &bufs_;
  std::vector<std::size_t> offsets_; // of each stream in the input file
  const char *mapped_ = nullptr;
  std::size_t stream_, at_ = 0;
  const unsigned replicas_;
  std::vector<std::vector<std::size_t>> count_; // copies taken this run, by stream and replica
  std::mutex lock_;
};

// A CPU op's host function asks the runtime: "call <function> <replica> <input bytes...>" and the
// inputs, answered by "ret <output bytes...>" and the outputs. `lock` keeps the messages of
// callbacks of different replicas (and output feeds) apart.
void connectHostFunctions(const Module &m, poplar::Engine &engine, std::FILE *out, std::mutex &lock, RunInputs &inputs) {
  for (std::size_t i = 0; i < m.hostFunctions.size(); ++i) {
    const HostFunctionSpec &f = m.hostFunctions[i];
    for (unsigned r = 0; r < m.replicas; ++r) {
      engine.connectHostFunction(f.handle, r, [&f, out, &lock, &inputs, i, r](poplar::ArrayRef<const void *> ins, poplar::ArrayRef<void *> outs) {
        const std::lock_guard<std::mutex> guard(lock);
        std::string head = "call " + std::to_string(i) + " " + std::to_string(r);
        for (std::size_t n : f.inputBytes) head += " " + std::to_string(n);
        head += "\n";
        writeAll(out, head.data(), head.size());
        for (std::size_t k = 0; k < f.inputBytes.size(); ++k) writeAll(out, ins[k], f.inputBytes[k]);
        std::fflush(out);
        inputs.finish(); // the answer comes after the run's payload
        std::string line;
        if (!readLine(line)) throw std::runtime_error("protocol: input ended while host function " + std::string(f.handle) + " waited for its results");
        const std::vector<std::string> w = words(line);
        if (w.empty() || w[0] != "ret" || w.size() != 1 + f.outputBytes.size())
          throw std::runtime_error("protocol: host function " + std::string(f.handle) + " expected 'ret' and " + std::to_string(f.outputBytes.size()) + " sizes, got '" + line.substr(0, 60) + "'");
        for (std::size_t k = 0; k < f.outputBytes.size(); ++k) {
          if (parseSize(w[1 + k]) != f.outputBytes[k])
            throw std::runtime_error("protocol: host function " + std::string(f.handle) + " output " + std::to_string(k) + " needs " + std::to_string(f.outputBytes[k]) + " bytes, got " + w[1 + k]);
          readExact(static_cast<char *>(outs[k]), f.outputBytes[k]);
        }
      });
    }
  }
}

// Input stream i's copies come from `inputs` as the device takes them.
void connectInputs(const Module &m, const Device &d, poplar::Engine &engine, RunInputs &inputs) {
  for (std::size_t i = 0; i < m.inputBytes.size(); ++i) {
    if (m.inputBytes[i] == 0) continue;
    const std::size_t per = d.inFifo[i].numElements() * d.graph.getTarget().getTypeSize(d.inFifo[i].elementType());
    if (per == 0 || m.inputBytes[i] % (per * m.replicas) != 0) {
      throw std::runtime_error("run: " + std::to_string(per) + " bytes per copy do not divide input stream " + std::to_string(i) + "'s " + std::to_string(m.inputBytes[i]));
    }
    for (unsigned r = 0; r < m.replicas; ++r) {
      engine.connectStreamToCallback("in" + std::to_string(i), r, [&inputs, i, r, per](void *p) { inputs.copy(i, r, per, p); });
    }
  }
}

void serve(poplar::Engine &engine, std::FILE *out, const Module &m, const Device &d) {
  std::vector<std::vector<char>> inBuf(m.inputBytes.size()), outBuf(m.outputBytes.size());
  for (std::size_t i = 0; i < inBuf.size(); ++i) inBuf[i].resize(m.inputBytes[i]);
  RunInputs inputs(inBuf, m.replicas);
  std::mutex hostLock;
  connectHostFunctions(m, engine, out, hostLock, inputs);
  // run program 1 (seeding stochastic rounding) before the next run after the seed is written
  bool reseed = m.stochasticRounding;
  connectInputs(m, d, engine, inputs);
  for (std::size_t i = 0; i < outBuf.size(); ++i) {
    outBuf[i].resize(m.outputBytes[i]);
    if (m.outputBytes[i] > 0) engine.connectStream("out" + std::to_string(i), outBuf[i].data(), outBuf[i].data() + outBuf[i].size());
  }
  std::size_t inputTotal = 0;
  for (std::size_t n : m.inputBytes) inputTotal += n;
  InputFile inputFile;
  std::string line;
  while (readLine(line)) {
    const std::vector<std::string> w = words(line);
    if (w.empty()) continue;
    if (w[0] == "quit" && w.size() == 1) return;
    // "inputs <path>": runs may put their inputs in that file ("ok 1" and a byte: 1 if mapped, 0 if not)
    if (w[0] == "inputs" && w.size() == 2) {
      const char mapped = inputFile.open(w[1], inputTotal) ? 1 : 0;
      writeAll(out, "ok 1\n", 5);
      writeAll(out, &mapped, 1);
      std::fflush(out);
      continue;
    }
    if (w[0] == "write" && w.size() == 3) {
      const std::size_t n = parseSize(w[2]);
      const std::size_t want = handleBytes(d, w[1]) * m.replicas;
      if (n != want) throw std::runtime_error("write " + w[1] + ": expected " + std::to_string(want) + " bytes, got " + std::to_string(n));
      std::vector<char> buf(n);
      readExact(buf.data(), n);
      if (isRemote(d, w[1])) {
        for (unsigned r = 0; r < m.replicas; ++r) engine.copyToRemoteBuffer(buf.data() + r * (n / m.replicas), w[1] + ".remote", 0, r);
      } else {
        engine.writeTensor(w[1] + ".w", buf.data(), buf.data() + n);
      }
      if (m.stochasticRounding && w[1] == "seed") reseed = true;
      writeAll(out, "ok\n", 3);
    } else if (w[0] == "read" && w.size() == 2) {
      const std::size_t n = handleBytes(d, w[1]) * m.replicas;
      std::vector<char> buf(n);
      if (isRemote(d, w[1])) {
        for (unsigned r = 0; r < m.replicas; ++r) engine.copyFromRemoteBuffer(w[1] + ".remote", buf.data() + r * (n / m.replicas), 0, r);
      } else {
        engine.readTensor(w[1] + ".r", buf.data(), buf.data() + n);
      }
      const std::string head = "ok " + std::to_string(n) + "\n";
      writeAll(out, head.data(), head.size());
      writeAll(out, buf.data(), n);
    } else if (((w[0] == "run" || w[0] == "runmapped") && w.size() == 1 + m.inputBytes.size()) ||
               ((w[0] == "runfeed" || w[0] == "runfeedmapped") && w.size() == 1 + m.inputBytes.size() + m.outputBytes.size())) {
      const bool feed = w[0] == "runfeed" || w[0] == "runfeedmapped";
      const bool mapped = w[0] == "runmapped" || w[0] == "runfeedmapped";
      if (mapped && inputFile.data() == nullptr) throw std::runtime_error("protocol: " + w[0] + " before an input file was mapped");
      for (std::size_t i = 0; i < inBuf.size(); ++i) {
        const std::size_t n = parseSize(w[1 + i]);
        if (n != m.inputBytes[i]) {
          throw std::runtime_error("run: input stream " + std::to_string(i) + " needs " + std::to_string(m.inputBytes[i]) + " bytes, got " + std::to_string(n));
        }
      }
      if (mapped) inputs.startMapped(inputFile.data());
      else inputs.start();
      if (reseed) {
        engine.run(1);
        reseed = false;
      }
      std::vector<std::vector<std::size_t>> count(outBuf.size());
      if (feed) {
        std::vector<std::size_t> perCopy;
        for (std::size_t i = 0; i < outBuf.size(); ++i) perCopy.push_back(parseSize(w[1 + inBuf.size() + i]));
        connectFeeds(m, engine, out, outBuf, perCopy, count, hostLock);
      }
      engine.run(0);
      inputs.finish();
      if (feed) {
        for (std::size_t i = 0; i < outBuf.size(); ++i) {
          if (m.outputBytes[i] > 0) engine.connectStream("out" + std::to_string(i), outBuf[i].data(), outBuf[i].data() + outBuf[i].size());
        }
      }
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
}

} // namespace

// Advances a ring buffer's counter (a scalar) modulo the ring's depth, on the counter's tile.
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
}

int hostMain(int argc, char **argv, const Module &m) {
  try {
    // answers go to the original stdout; anything else written to stdout goes to stderr
    const int protocolFd = dup(1);
    if (protocolFd < 0 || dup2(2, 1) < 0) throw std::runtime_error("cannot set up the protocol channel");
    std::FILE *out = fdopen(protocolFd, "wb");
    if (out == nullptr) throw std::runtime_error("cannot open the protocol channel");
    const char *codelets = argc > 1 ? argv[1] : "codelets.gp";

    // an offline target compiles the graph and runs nothing (connectionType Never)
    poplar::Device device = m.deviceKind == kOffline ? poplar::Device() : attachDevice(m);
    const poplar::Target target = m.deviceKind == kOffline ? poplar::Target::createIPUTarget(m.deviceIpus, m.ipuArch, deviceOptions(m)) : device.getTarget();
    poplar::Graph graph(target, poplar::replication_factor(m.replicas));
    popops::addCodelets(graph);
    poplin::addCodelets(graph);
    popnn::addCodelets(graph);
    if (m.stochasticRounding) poprand::addCodelets(graph);
    graph.addCodelets(codelets);
    Device d{graph, {}, {}, {}, {}, {}, {}, {}, {}};
    const unsigned tilesPerIpu = graph.getTarget().getTilesPerIPU();
    if (m.ioTiles >= tilesPerIpu) throw std::runtime_error("numIOTiles leaves no compute tiles on this target");
    // compute tiles first, then the IO tiles of each IPU
    const unsigned computeTiles = tilesPerIpu - m.ioTiles;
    for (unsigned i = 0; i < m.ipus; ++i) {
      d.ipu.push_back(graph.createVirtualGraph(i * tilesPerIpu, i * tilesPerIpu + computeTiles));
      if (m.ioTiles > 0) d.io.push_back(graph.createVirtualGraph(i * tilesPerIpu + computeTiles, (i + 1) * tilesPerIpu));
    }
    m.declare(d);
    poplar::program::Sequence program;
    // the Precision options, set on every tile at the start of each run
    if (m.floatingPointExceptions) {
      poplar::setFloatingPointBehaviour(graph, program, poplar::FloatingPointBehaviour(true, true, true, false, true), "floating-point exceptions");
    }
    if (m.stochasticRounding) poplar::setStochasticRounding(graph, program, true, "stochastic rounding");
    if (m.floatingPointExceptions || m.stochasticRounding) program.add(m.buildProgram(d));
    else program = m.buildProgram(d);
    std::vector<poplar::program::Program> programs = {program};
    if (m.stochasticRounding) {
      // program 1 seeds the generators stochastic rounding draws from with the run seed
      poplar::program::Sequence seedProgram;
      poprand::setSeed(graph, poplar::concat(d.seed.reshape({1}), d.step.reshape({1})), 0, seedProgram, "stochastic rounding seed");
      programs.push_back(seedProgram);
    }
    poplar::Engine engine(graph, programs);
    if (m.deviceKind == kOffline) {
      std::fprintf(stderr, "compiled for an offline %s target of %u IPUs; nothing runs without a device (connectionType Never)\n", m.ipuArch, m.deviceIpus);
      return 0;
    }
    engine.load(device);
    serve(engine, out, m, d);
    std::fflush(out);
    return 0;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}

} // namespace tilegraph

// the containers tilegraph_host.hpp declares extern
template class std::vector<poplar::Tensor>;
template class std::map<std::size_t, poplar::Tensor>;
template class std::vector<poplar::DataStream>;
template class std::vector<tilegraph::TensorRow>;
template class std::vector<tilegraph::HostFunctionSpec>;
template class std::vector<poplar::Type>;
template class std::vector<std::size_t>;
template class std::vector<std::vector<std::size_t>>;
