// The public poplar::Engine and Executable API over EngineRuntime (see engine_runtime.hpp).
#include "engine_runtime.hpp"

#include <poplar/Engine.hpp>
#include <poplar/exceptions.hpp>

#include <cstdlib>
#include <fstream>

namespace poplar {

using namespace poplar_host;

Executable::Executable(std::shared_ptr<CompiledGraph> compiled) : compiled_(std::move(compiled)) {}
Executable::Executable(Executable &&) noexcept = default;
Executable &Executable::operator=(Executable &&) noexcept = default;
Executable::~Executable() = default;
void Executable::serialize(std::ostream &) const {
  throw poplar_error("Executable::serialize is not supported by the emulation");
}
Executable Executable::deserialize(std::istream &) {
  throw poplar_error("Executable::deserialize is not supported by the emulation");
}

Executable compileGraph(const Graph &graph, ArrayRef<program::Program> progs, const OptionFlags &opt, ProgressFunc progress,
                        const DebugContext &) {
  if (progress) progress(0, 1);
  Executable exe(compileForEngine(graph, progs, opt));
  if (progress) progress(1, 1);
  return exe;
}

Engine::Engine(const Graph &graph, ArrayRef<program::Program> progs, const OptionFlags &opt, ProgressFunc progress,
               const DebugContext &dc)
    : Engine(compileGraph(graph, progs, opt, std::move(progress), dc), opt) {}

Engine::Engine(const Graph &graph, program::Program prog, const OptionFlags &opt, ProgressFunc progress,
               const DebugContext &dc)
    : Engine(graph, ArrayRef<program::Program>(&prog, 1), opt, std::move(progress), dc) {}

Engine::Engine(Executable &&exe, const OptionFlags &opt)
    : rt_(std::make_unique<EngineRuntime>(exe.getCompiled(), opt)) {}
Engine::Engine(const Executable &exe, const OptionFlags &opt)
    : rt_(std::make_unique<EngineRuntime>(exe.getCompiled(), opt)) {}
Engine::Engine(Engine &&) noexcept = default;
Engine &Engine::operator=(Engine &&) noexcept = default;
Engine::~Engine() = default;

void Engine::load(const Device &device) {
  rt_->load(device);
  // emulation only: the summary for tools that compare it with their own plan
  if (const char *file = std::getenv("POPLAR_HOST_PROFILE_SUMMARY")) {
    std::ofstream out(file);
    printProfileSummary(out);
  }
}
void Engine::prepare(const Device &device) { rt_->load(device); }
void Engine::deploy() {}
void Engine::loadAndRun(const Device &device, unsigned prog) {
  load(device);
  run(prog);
}
void Engine::run(unsigned prog, const std::string &) { rt_->run(prog); }

void Engine::connectStream(StringRef handle, void *begin, void *end) { rt_->connectStream(handle.str(), begin, end); }
void Engine::connectStream(StringRef handle, void *p) { rt_->connectStream(handle.str(), p); }
void Engine::connectStreamToCallback(StringRef handle, std::function<void(void *)> f) {
  rt_->connectCallback(handle.str(), std::move(f), -1);
}
void Engine::connectStreamToCallback(StringRef handle, unsigned replicaIndex, std::function<void(void *)> f) {
  rt_->connectCallback(handle.str(), std::move(f), static_cast<int>(replicaIndex));
}

void Engine::connectHostFunction(StringRef handle, unsigned index, HostCallbackHandle f) {
  rt_->connectHostFunction(handle.str(), index, f.release());
}

HostCallbackHandle::HostCallbackHandle(Fn f) : fn_(std::move(f)) {}
HostCallbackHandle::HostCallbackHandle(std::unique_ptr<HostCallback> f) {
  std::shared_ptr<HostCallback> shared(std::move(f));
  fn_ = [shared](ArrayRef<const void *> ins, ArrayRef<void *> outs) { (*shared)(ins, outs); };
}

void Engine::writeTensor(StringRef handle, const void *buf, const void *bufEnd) {
  auto *b = static_cast<std::uint8_t *>(const_cast<void *>(buf));
  rt_->hostTransfer(handle.str(), b, static_cast<std::size_t>(static_cast<const std::uint8_t *>(bufEnd) - b), true);
}
void Engine::readTensor(StringRef handle, void *buf, void *bufEnd) {
  auto *b = static_cast<std::uint8_t *>(buf);
  rt_->hostTransfer(handle.str(), b, static_cast<std::size_t>(static_cast<std::uint8_t *>(bufEnd) - b), false);
}
void Engine::writeTensor(StringRef handle, const void *buf) {
  rt_->hostTransfer(handle.str(), static_cast<std::uint8_t *>(const_cast<void *>(buf)), true);
}
void Engine::readTensor(StringRef handle, void *buf) {
  rt_->hostTransfer(handle.str(), static_cast<std::uint8_t *>(buf), false);
}

void Engine::setPrintStream(std::ostream &stream) { rt_->setPrintStream(stream); }
void Engine::setPrintTensorStream(std::ostream &stream) { rt_->setPrintStream(stream); }
std::vector<std::string> Engine::listStreams() const { return rt_->listStreams(); }
OptionFlags Engine::getEngineOptions() const { return rt_->options(); }
void Engine::resetExecutionProfile() { rt_->resetMeasurements(); }
void Engine::enableExecutionProfiling() { rt_->measureRuns(true); }
void Engine::disableExecutionProfiling() { rt_->measureRuns(false); }

void Engine::printProfileSummary(std::ostream &out, const OptionFlags &) const {
  const auto &cg = rt_->compiled();
  std::uint64_t total = 0, peak = 0, always = 0;
  unsigned peakTile = 0, used = 0;
  for (unsigned t = 0; t < cg.tileBytes.size(); ++t) {
    total += cg.tileBytes[t];
    always += cg.alwaysLiveBytes[t];
    if (cg.tileBytes[t]) ++used;
    if (cg.tileBytes[t] > peak) {
      peak = cg.tileBytes[t];
      peakTile = t;
    }
  }
  out << "Target: " << cg.target.getNumIPUs() << " IPU(s) x " << cg.target.getTilesPerIPU() << " tiles, "
      << cg.replicas << " replica(s) [poplar-host emulation]\n"
      << "Memory (one replica): " << total << " bytes on " << used << " tiles (" << always
      << " always live, the rest at each tile's own peak); peak " << peak << " bytes on tile " << peakTile << " of "
      << cg.target.getBytesPerTile() << "\n"
      << "Vertices: " << cg.numVertices << ", compute sets executed: " << cg.computeSets.size()
      << ", variables: " << cg.vars.size() << "\n";
  out << remoteMemorySummary(*cg.graph, cg.replicas);
}

} // namespace poplar
