// Remote buffers ("streaming memory"): Graph::addRemoteBuffer, the Copy
// programs to and from them, and the engine's host access. Every replica has
// its own rows; they live beside the engine's variables, never in a tile's
// memory, so they count neither towards a tile's bytes nor towards the
// out-of-memory check.
#include "distributed.hpp"
#include "internal.hpp"
#include "profile.hpp"

#include <poplar/Engine.hpp>
#include <poplar/exceptions.hpp>
#include <poplar_host/RemoteMemory.hpp>

#include <cstring>
#include <limits>

namespace poplar_host {

namespace {

const RemoteBufferInfo &bufferInfo(const poplar::RemoteBuffer &b, const char *what) {
  if (!b.getGraph())
    throw poplar::control_program_error(message(what, ": the RemoteBuffer is default-constructed (make it with "
                                                      "Graph::addRemoteBuffer)"));
  const auto &s = *static_cast<const GraphState *>(b.getGraph());
  return s.remoteBuffers.at(b.getId());
}

/// Checks a Copy between `t` and remote buffer `b` and makes its node.
std::shared_ptr<ProgramNode> remoteCopyNode(ProgramNode::Kind kind, const poplar::RemoteBuffer &b,
                                            const poplar::Tensor &t, const poplar::Tensor *offset) {
  const bool toRemote = kind == ProgramNode::Kind::CopyToRemote;
  const char *what = toRemote ? "Copy to a remote buffer" : "Copy from a remote buffer";
  const auto &info = bufferInfo(b, what);
  const auto &ti = impl(t, toRemote ? "Copy source" : "Copy destination");
  if (ti.graph != b.getGraph())
    throw poplar::control_program_error(message(what, " '", info.handle, "': the tensor belongs to another graph"));
  if (ti.type != info.type)
    throw poplar::control_program_error(message(what, " '", info.handle, "': the buffer holds ", info.type,
                                                " elements but the tensor is ", ti.type));
  std::size_t rows = 1;
  if (offset) {
    const auto &oi = impl(*offset, "Copy offset");
    if (oi.graph != b.getGraph())
      throw poplar::control_program_error(message(what, " '", info.handle, "': the offset belongs to another graph"));
    if (oi.type != poplar::UNSIGNED_INT && oi.type != poplar::INT)
      throw poplar::control_program_error(message(what, " '", info.handle, "': the offset must be an UNSIGNED_INT or INT "
                                                  "tensor, got ", oi.type));
    if (oi.shape.size() > 1 || oi.numElements == 0)
      throw poplar::control_program_error(message(what, " '", info.handle, "': the offset must be a scalar or a "
                                                  "non-empty rank-1 tensor (one row each), got shape ",
                                                  shapeString(oi.shape)));
    rows = oi.numElements;
  }
  if (ti.numElements != rows * info.numElements)
    throw poplar::control_program_error(
        message(what, " '", info.handle, "': a row holds ", info.numElements, " elements, so ", rows,
                " row(s) need a tensor of ", rows * info.numElements, " elements, but the tensor has shape ",
                shapeString(ti.shape)));
  if (!toRemote && t.containsConstant())
    throw poplar::control_program_error(message(what, " '", info.handle, "': the destination contains a constant"));
  auto n = makeNode(kind);
  n->id = b.getId();
  (toRemote ? n->src : n->dst) = t;
  if (offset) {
    n->remoteOffset = *offset;
    n->touches = {*offset}; // read by the copy: keeps the offset live until then
  }
  return n;
}

} // namespace

std::uint64_t remoteBufferBytes(const GraphState &graph) {
  std::uint64_t bytes = 0;
  for (const auto &b : graph.remoteBuffers) bytes += std::uint64_t(b.numElements) * b.repeats * b.type.size();
  return bytes;
}

std::string remoteMemorySummary(const GraphState &graph, unsigned replicas) {
  if (graph.remoteBuffers.empty()) return "";
  const auto bytes = remoteBufferBytes(graph);
  return message("Remote memory (streaming memory, not on tiles): ", bytes, " bytes per replica (", bytes * replicas,
                 " for ", replicas, " replica(s)) in ", graph.remoteBuffers.size(), " remote buffer(s)\n");
}

void RemoteMemory::load(const GraphState &graph, unsigned replicas) {
  graph_ = &graph;
  buffers_ = graph.remoteBuffers;
  data_.assign(replicas, std::vector<std::vector<std::uint8_t>>(buffers_.size()));
}

std::vector<std::uint8_t> &RemoteMemory::storage(unsigned replica, unsigned buffer) {
  auto &bytes = data_[replica][buffer];
  const auto &info = buffers_[buffer];
  if (bytes.empty()) bytes.assign(info.numElements * info.repeats * info.type.size(), 0);
  return bytes;
}

void RemoteMemory::copy(const ProgramNode &n, const ReplicaContext &ctx) {
  if (n.id >= buffers_.size())
    throw poplar::runtime_error(message("a program copies remote buffer ", n.id, " which the engine did not load"));
  const auto &info = buffers_[n.id];
  const std::size_t rowBytes = info.numElements * info.type.size();
  std::vector<std::size_t> rows{0};
  if (n.remoteOffset.valid()) {
    rows.clear();
    for (double v : ctx.read(n.remoteOffset)) {
      if (!(v >= 0 && v < static_cast<double>(info.repeats)))
        throw poplar::application_runtime_error(
            message("remote buffer '", info.handle, "': offset ", static_cast<long long>(v), " is out of range (",
                    info.repeats, " repeat(s)) in replica ", ctx.replica));
      rows.push_back(static_cast<std::size_t>(v));
    }
  }
  if (n.kind == ProgramNode::Kind::CopyToRemote) {
    const auto bytes = ctx.readBytes(n.src);
    auto &mem = storage(ctx.replica, n.id);
    for (std::size_t i = 0; i < rows.size(); ++i)
      std::memcpy(mem.data() + rows[i] * rowBytes, bytes.data() + i * rowBytes, rowBytes);
  } else {
    std::vector<std::uint8_t> bytes(rows.size() * rowBytes, 0);
    const auto &mem = data_[ctx.replica][n.id];
    if (!mem.empty())
      for (std::size_t i = 0; i < rows.size(); ++i)
        std::memcpy(bytes.data() + i * rowBytes, mem.data() + rows[i] * rowBytes, rowBytes);
    ctx.writeBytes(n.dst, bytes.data());
  }
}

std::size_t RemoteMemory::hostCopy(const std::string &handle, std::uint8_t *buf, std::size_t bytes,
                                   std::uint64_t repeat, unsigned replica, bool toRemote) {
  const char *what = toRemote ? "copyToRemoteBuffer" : "copyFromRemoteBuffer";
  if (!graph_) throw poplar::runtime_error(message(what, "('", handle, "') called before Engine::load"));
  unsigned id = 0;
  while (id < buffers_.size() && buffers_[id].handle != handle) ++id;
  if (id == buffers_.size())
    throw poplar::poplar_error(message(what, ": no remote buffer '", handle, "' (create it with Graph::addRemoteBuffer)"));
  const auto &info = buffers_[id];
  if (repeat >= info.repeats)
    throw poplar::index_error(message(what, "('", handle, "'): repeat ", repeat, " is out of range (the buffer has ",
                                      info.repeats, ")"));
  if (replica >= data_.size())
    throw poplar::index_error(message(what, "('", handle, "'): replica ", replica, " is out of range (the engine has ",
                                      data_.size(), ")"));
  const std::size_t rowBytes = info.numElements * info.type.size();
  if (bytes != std::numeric_limits<std::size_t>::max() && bytes != rowBytes)
    throw poplar::poplar_error(message(what, "('", handle, "'): the host buffer has ", bytes, " bytes but a row of ",
                                       info.numElements, " ", info.type, " elements has ", rowBytes));
  auto &mem = storage(replica, id);
  if (toRemote) std::memcpy(mem.data() + repeat * rowBytes, buf, rowBytes);
  else std::memcpy(buf, mem.data() + repeat * rowBytes, rowBytes);
  return rowBytes;
}

std::uint64_t remoteMemoryBytes(const poplar::Engine &engine) { return remoteBufferBytes(graphOf(engine.getRuntime())); }

} // namespace poplar_host

namespace poplar {

using namespace poplar_host;

RemoteBuffer Graph::addRemoteBuffer(StringRef handle, const Type &elementType, std::size_t numElements,
                                    std::size_t repeats, bool rearrangeOnHost, bool optimiseMemory) {
  const std::string name = handle.str();
  if (name.empty()) throw poplar_error("addRemoteBuffer: the handle is empty");
  for (const auto &b : state_->remoteBuffers)
    if (b.handle == name) throw poplar_error(message("addRemoteBuffer: the handle '", name, "' is already in use"));
  if (numElements == 0 || repeats == 0)
    throw poplar_error(message("addRemoteBuffer('", name, "'): numElements (", numElements, ") and repeats (", repeats,
                               ") must be at least 1"));
  const auto id = static_cast<unsigned>(state_->remoteBuffers.size());
  state_->remoteBuffers.push_back({name, elementType, numElements, repeats, rearrangeOnHost, optimiseMemory});
  return RemoteBuffer(state_.get(), id, name, elementType, numElements, repeats, rearrangeOnHost, optimiseMemory,
                      state_->replicationFactor);
}

namespace program {

Copy::Copy(const RemoteBuffer &buffer, Tensor dst, const DebugContext &)
    : Program(remoteCopyNode(ProgramNode::Kind::CopyFromRemote, buffer, dst, nullptr)) {}
Copy::Copy(const RemoteBuffer &buffer, Tensor dst, Tensor offset, const DebugContext &)
    : Program(remoteCopyNode(ProgramNode::Kind::CopyFromRemote, buffer, dst, &offset)) {}
Copy::Copy(Tensor src, const RemoteBuffer &buffer, const DebugContext &)
    : Program(remoteCopyNode(ProgramNode::Kind::CopyToRemote, buffer, src, nullptr)) {}
Copy::Copy(Tensor src, const RemoteBuffer &buffer, Tensor offset, const DebugContext &)
    : Program(remoteCopyNode(ProgramNode::Kind::CopyToRemote, buffer, src, &offset)) {}

} // namespace program

void Engine::copyToRemoteBuffer(void *w, StringRef handle, std::uint64_t repeatIndex, unsigned replicationIndex) {
  remoteRowCopy(handle, w, std::numeric_limits<std::size_t>::max(), repeatIndex, replicationIndex, true);
}
void Engine::copyFromRemoteBuffer(StringRef handle, void *w, std::uint64_t repeatIndex, unsigned replicationIndex) {
  remoteRowCopy(handle, w, std::numeric_limits<std::size_t>::max(), repeatIndex, replicationIndex, false);
}
void Engine::remoteRowCopy(StringRef handle, void *buf, std::size_t bytes, std::uint64_t repeatIndex, unsigned replica,
                           bool toRemote) {
  EngineProfiler *profile = runProfiler(*rt_);
  const auto t0 = profile ? EngineProfiler::now() : EngineProfiler::Clock::time_point();
  const std::size_t moved =
      remoteMemory(*rt_).hostCopy(handle.str(), static_cast<std::uint8_t *>(buf), bytes, repeatIndex, replica, toRemote);
  // a row of another process's replica comes from that process (see distributed.hpp)
  if (!toRemote) shareReplicaRow(static_cast<std::uint8_t *>(buf), moved, replica, localReplicasOf(*rt_));
  if (profile) profile->hostAccess(toRemote, moved, t0);
}

} // namespace poplar
