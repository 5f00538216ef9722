// What passes between the host and a running engine: streams (connected buffers or
// callbacks), host function calls, readTensor/writeTensor and printed tensors.
#include "engine_runtime.hpp"

#include <poplar/exceptions.hpp>

#include <algorithm>
#include <functional>
#include <sstream>

namespace poplar_host {

using Kind = ProgramNode::Kind;

void EngineRuntime::connectStream(const std::string &handle, void *begin, void *end) {
  const unsigned id = streamId(handle);
  const std::size_t perCopy = copyBytes(id);
  const auto bytes = static_cast<std::size_t>(static_cast<std::uint8_t *>(end) - static_cast<std::uint8_t *>(begin));
  if (bytes == 0 || bytes % perCopy != 0)
    throw poplar::stream_connection_error(message("connectStream('", handle, "'): a buffer of ", bytes,
                                                  " bytes is not a whole number of copies of ", perCopy, " bytes (",
                                                  copyDescription(id), ")"));
  auto &c = streams_[id];
  c = StreamConnection();
  c.begin = static_cast<std::uint8_t *>(begin);
  c.bytes = bytes;
  c.connected = true;
  for (auto &counts : copyCount_) counts[id] = 0;
}

void EngineRuntime::connectStream(const std::string &handle, void *p) {
  const unsigned id = streamId(handle);
  connectStream(handle, p, static_cast<std::uint8_t *>(p) + copyBytes(id));
}

void EngineRuntime::connectHostFunction(const std::string &handle, unsigned replica, poplar::HostCallbackHandle::Fn f) {
  const auto &fs = cg_->hostFunctions;
  const auto it = std::find_if(fs.begin(), fs.end(), [&](const HostFunctionInfo &x) { return x.handle == handle; });
  if (it == fs.end())
    throw poplar::stream_connection_error(message("connectHostFunction('", handle, "'): no host function of that handle"));
  if (replica >= cg_->replicas)
    throw poplar::stream_connection_error(message("connectHostFunction('", handle, "'): replica ", replica, " does not exist"));
  hostFunctions_[{static_cast<unsigned>(it - fs.begin()), replica}] = std::move(f);
}

void EngineRuntime::connectCallback(const std::string &handle, std::function<void(void *)> f, int replica) {
  const unsigned id = streamId(handle);
  auto &c = streams_[id];
  if (c.begin) c = StreamConnection();
  if (replica < 0) c.callback = std::move(f);
  else {
    if (static_cast<unsigned>(replica) >= cg_->replicas)
      throw poplar::stream_connection_error(message("connectStreamToCallback('", handle, "'): replica ", replica,
                                                    " does not exist"));
    c.replicaCallbacks[static_cast<unsigned>(replica)] = std::move(f);
  }
  c.connected = true;
}

void EngineRuntime::hostTransfer(const std::string &handle, std::uint8_t *buf, std::size_t bytes, bool write) {
  if (!loaded_) throw poplar::runtime_error(message(write ? "writeTensor" : "readTensor", "('", handle,
                                                    "') called before Engine::load"));
  auto it = cg_->hostHandles.find(handle);
  if (it == cg_->hostHandles.end() || it->second.write != write)
    throw poplar::poplar_error(message("no host ", write ? "write" : "read", " handle '", handle,
                                       "' (create it with Graph::", write ? "createHostWrite" : "createHostRead",
                                       ")"));
  const auto &t = impl(it->second.tensor);
  const std::size_t per = t.numElements * t.type.size();
  if (bytes != per * cg_->replicas)
    throw poplar::poplar_error(message(write ? "writeTensor" : "readTensor", "('", handle, "'): the buffer has ",
                                       bytes, " bytes but ", cg_->replicas, " replica(s) of ", t.numElements, " ",
                                       t.type, " elements need ", per * cg_->replicas));
  const auto t0 = timing_ ? EngineProfiler::now() : EngineProfiler::Clock::time_point();
  for (unsigned r = 0; r < cg_->replicas; ++r) {
    if (write) scatter(r, t.regions, t.type.size(), buf + r * per);
    else gather(r, t.regions, t.type.size(), buf + r * per);
  }
  if (!write) shareReplicaSlices(buf, per, local_); // the other processes' replicas from them
  if (timing_) timing_->hostAccess(write, bytes, t0);
}

void EngineRuntime::hostTransfer(const std::string &handle, std::uint8_t *buf, bool write) {
  auto it = cg_->hostHandles.find(handle);
  if (it == cg_->hostHandles.end())
    throw poplar::poplar_error(message("no host handle '", handle, "'"));
  const auto &t = impl(it->second.tensor);
  hostTransfer(handle, buf, t.numElements * t.type.size() * cg_->replicas, write);
}

std::vector<std::string> EngineRuntime::listStreams() const {
  std::vector<std::string> out;
  for (const auto &s : cg_->streams) out.push_back(s.handle);
  return out;
}

// --- streams -------------------------------------------------------------------
unsigned EngineRuntime::streamId(const std::string &handle) const {
  for (unsigned i = 0; i < cg_->streams.size(); ++i)
    if (cg_->streams[i].handle == handle) return i;
  throw poplar::stream_connection_error(message("no stream named '", handle, "'"));
}

bool EngineRuntime::broadcastStream(unsigned id) const {
  return cg_->streams[id].hostToDevice && cg_->streams[id].mode == poplar::ReplicatedStreamMode::BROADCAST;
}

std::size_t EngineRuntime::copyBytes(unsigned id) const {
  const auto &s = cg_->streams[id];
  return s.numElements * s.type.size() * (broadcastStream(id) ? 1 : cg_->replicas);
}

std::string EngineRuntime::copyDescription(unsigned id) const {
  const auto &s = cg_->streams[id];
  return message(broadcastStream(id) ? 1 : cg_->replicas, " replica(s) x ", s.numElements, " ", s.type);
}

void EngineRuntime::streamCopy(const ProgramNode &n, unsigned replica) {
  const unsigned id = n.id;
  const auto &s = cg_->streams[id];
  auto &c = streams_[id];
  if (!c.connected)
    throw poplar::stream_connection_error(message("stream '", s.handle, "' is not connected"));
  const bool toDevice = n.kind == Kind::CopyFromStream;
  const auto &t = impl(toDevice ? n.dst : n.src);
  const std::size_t es = t.type.size(), per = t.numElements * es;
  std::uint8_t *slot = nullptr;
  std::function<void(void *)> *cb = nullptr;
  if (c.begin) {
    const std::size_t k = copyCount_[replica][id]++;
    const std::size_t at = (k * copyBytes(id)) % c.bytes + (broadcastStream(id) ? 0 : replica * per);
    slot = c.begin + at;
  } else {
    auto it = c.replicaCallbacks.find(replica);
    cb = it != c.replicaCallbacks.end() ? &it->second : (c.callback ? &c.callback : nullptr);
    if (!cb)
      throw poplar::stream_connection_error(message("stream '", s.handle, "' has no callback for replica ", replica));
  }
  if (slot) { // a connected buffer: straight between it and the variables
    if (toDevice) scatter(replica, t.regions, es, slot);
    else gather(replica, t.regions, es, slot);
    return;
  }
  // kept between copies: a fresh buffer of a large copy is pages to fault in every time
  thread_local std::vector<std::uint8_t> tmp;
  tmp.resize(per);
  auto call = [&] {
    std::lock_guard<std::mutex> lock(callbackMutex_);
    (*cb)(tmp.data());
  };
  if (toDevice) {
    call();
    scatter(replica, t.regions, es, tmp.data());
  } else {
    gather(replica, t.regions, es, tmp.data());
    call();
  }
}

// --- host functions ------------------------------------------------------------
void EngineRuntime::hostCall(const ProgramNode &n, unsigned replica) {
  const auto &f = cg_->hostFunctions[n.id];
  const auto cb = hostFunctions_.find({n.id, replica});
  if (cb == hostFunctions_.end() || !cb->second)
    throw poplar::stream_connection_error(message("host function '", f.handle, "' is not connected for replica ", replica));
  std::vector<std::vector<std::uint8_t>> bufs(n.touches.size());
  std::vector<const void *> ins;
  std::vector<void *> outs;
  for (std::size_t i = 0; i < n.touches.size(); ++i) {
    const auto &t = impl(n.touches[i]);
    bufs[i].resize(t.numElements * t.type.size());
    if (i < n.count) {
      gather(replica, t.regions, t.type.size(), bufs[i].data());
      ins.push_back(bufs[i].data());
    } else outs.push_back(bufs[i].data());
  }
  {
    std::lock_guard<std::mutex> lock(callbackMutex_);
    cb->second(ins, outs);
  }
  for (std::size_t i = n.count; i < n.touches.size(); ++i) {
    const auto &t = impl(n.touches[i]);
    scatter(replica, t.regions, t.type.size(), bufs[i].data());
  }
}

// --- printing ------------------------------------------------------------------
void EngineRuntime::printTensor(const ProgramNode &n, unsigned replica) {
  const auto &t = impl(n.src);
  auto values = context(replica).read(n.src);
  std::ostringstream os;
  os << (n.text.empty() ? std::string("tensor") : n.text);
  if (cg_->replicas > 1) os << " (replica " << replica << ")";
  os << ": ";
  // Nested brackets following the shape; integers print without decimals.
  const bool isFloat = t.type.isFloatingPoint();
  std::size_t k = 0;
  std::function<void(std::size_t)> rec = [&](std::size_t d) {
    if (d == t.shape.size()) {
      if (isFloat) os << values[k++];
      else os << static_cast<long long>(values[k++]);
      return;
    }
    os << '[';
    for (std::size_t i = 0; i < t.shape[d]; ++i) {
      if (i) os << (d + 1 == t.shape.size() ? " " : ", ");
      rec(d + 1);
    }
    os << ']';
  };
  rec(0);
  os << '\n';
  if (currentLane && currentLane->engine == this) {
    currentLane->prints.emplace_back(currentLane->child, os.str());
    return;
  }
  std::lock_guard<std::mutex> lock(printMutex_);
  (*print_) << os.str() << std::flush;
}

} // namespace poplar_host
