// The engine's exchanges in a distributed run (see distributed.hpp). Every
// process calls them in the same order: the collectives of a run in program
// order, the state broadcast at the first run, and readTensor /
// copyFromRemoteBuffer of the host program, which every process must call
// alike (same handles, same order) even for replicas it does not run.
#include "distributed.hpp"

#include "world.hpp"

#include <poplar/exceptions.hpp>

#include <cstring>

namespace poplar_host {

LocalReplicas localReplicas(unsigned replicas) {
  World &w = world();
  LocalReplicas local;
  local.end = replicas;
  if (!w.distributed()) return local;
  if (replicas % w.processes != 0)
    throw poplar::runtime_error(message("distributed run: the graph has ", replicas, " replica(s), which ", w.processes,
                                        " processes cannot share equally: the replication factor must be a multiple "
                                        "of the number of processes"));
  const unsigned per = replicas / w.processes;
  local.begin = w.process * per;
  local.end = local.begin + per;
  local.distributed = true;
  return local;
}

void exchangeContributions(std::vector<std::vector<double>> &contributions, const LocalReplicas &local,
                           std::uint64_t ordinal) {
  World &w = world();
  const std::size_t n = contributions[local.begin].size();
  for (unsigned r = local.begin; r < local.end; ++r)
    if (contributions[r].size() != n)
      throw poplar::runtime_error(message("a collective got ", contributions[r].size(), " elements from replica ", r,
                                          " but ", n, " from replica ", local.begin));
  // Same collective, same size everywhere? Otherwise the data would not line up.
  const std::uint64_t mine[2] = {ordinal, n};
  std::vector<std::uint64_t> all(2 * std::size_t(w.processes));
  w.allgather(mine, sizeof mine, all.data());
  for (unsigned p = 0; p < w.processes; ++p)
    if (all[2 * p] != ordinal || all[2 * p + 1] != n) {
      w.broken();
      throw poplar::runtime_error(
          message("distributed run: process ", p, " is at collective ", all[2 * p] + 1, " of this run with ",
                  all[2 * p + 1], " elements per replica, but process ", w.process, " is at collective ", ordinal + 1,
                  " with ", n, ": the processes took different paths through the program"));
    }
  const std::size_t count = local.count();
  std::vector<double> send(count * n), recv(send.size() * w.processes);
  for (std::size_t i = 0; i < count; ++i)
    std::copy(contributions[local.begin + i].begin(), contributions[local.begin + i].end(), send.begin() + i * n);
  w.allgather(send.data(), send.size() * sizeof(double), recv.data());
  // process p's replicas are p*count .. (p+1)*count-1
  for (std::size_t r = 0; r < contributions.size(); ++r)
    if (!local.has(static_cast<unsigned>(r)))
      contributions[r].assign(recv.begin() + r * n, recv.begin() + (r + 1) * n);
}

void broadcastState(std::vector<std::vector<DeviceBytes>> &data, const std::vector<VarInfo> &vars,
                    RemoteMemory &remote) {
  World &w = world();
  std::size_t varBytes = 0;
  for (const auto &replica : data)
    for (std::size_t v = 0; v < vars.size(); ++v)
      if (!vars[v].isConstant) varBytes += replica[v].size();
  // Remote rows are allocated on first use, so their size is process 0's to tell.
  std::vector<std::uint8_t> rows;
  std::uint64_t rowBytes = 0;
  if (w.process == 0) {
    rows = remote.pack();
    rowBytes = rows.size();
  }
  w.broadcast(&rowBytes, sizeof rowBytes, 0);
  std::vector<std::uint8_t> buffer(varBytes + rowBytes);
  if (w.process == 0) {
    std::uint8_t *p = buffer.data();
    for (const auto &replica : data)
      for (std::size_t v = 0; v < vars.size(); ++v)
        if (!vars[v].isConstant) p = std::copy(replica[v].begin(), replica[v].end(), p);
    std::copy(rows.begin(), rows.end(), p);
  }
  w.broadcast(buffer.data(), buffer.size(), 0);
  if (w.process == 0) return;
  const std::uint8_t *p = buffer.data();
  for (auto &replica : data)
    for (std::size_t v = 0; v < vars.size(); ++v)
      if (!vars[v].isConstant) {
        std::memcpy(replica[v].data(), p, replica[v].size());
        p += replica[v].size();
      }
  remote.unpack(std::vector<std::uint8_t>(buffer.begin() + (p - buffer.data()), buffer.end()));
}

void shareReplicaSlices(std::uint8_t *buf, std::size_t per, const LocalReplicas &local) {
  if (!local.distributed) return;
  const std::size_t bytes = per * local.count();
  const std::vector<std::uint8_t> mine(buf + local.begin * per, buf + local.begin * per + bytes);
  world().allgather(mine.data(), bytes, buf); // process p's slices land at p * bytes
}

void shareReplicaRow(std::uint8_t *buf, std::size_t bytes, unsigned replica, const LocalReplicas &local) {
  if (!local.distributed) return;
  world().broadcast(buf, bytes, replica / local.count());
}

// --- remote buffers --------------------------------------------------------------
// Packed as, for each replica and buffer, a 64-bit byte count (0: never written) and the rows.

std::vector<std::uint8_t> RemoteMemory::pack() const {
  std::vector<std::uint8_t> out;
  for (const auto &replica : data_)
    for (const auto &rows : replica) {
      const std::uint64_t n = rows.size();
      const auto *np = reinterpret_cast<const std::uint8_t *>(&n);
      out.insert(out.end(), np, np + sizeof n);
      out.insert(out.end(), rows.begin(), rows.end());
    }
  return out;
}

void RemoteMemory::unpack(const std::vector<std::uint8_t> &bytes) {
  std::size_t at = 0;
  auto corrupt = [] {
    return poplar::runtime_error("distributed run: process 0's remote buffers do not match this process's graph "
                                 "(start every process with the same model and options)");
  };
  for (auto &replica : data_)
    for (std::size_t b = 0; b < replica.size(); ++b) {
      std::uint64_t n = 0;
      if (at + sizeof n > bytes.size()) throw corrupt();
      std::memcpy(&n, bytes.data() + at, sizeof n);
      at += sizeof n;
      const auto &info = buffers_[b];
      if (n != 0 && n != info.numElements * info.repeats * info.type.size()) throw corrupt();
      if (at + n > bytes.size()) throw corrupt();
      replica[b].assign(bytes.begin() + at, bytes.begin() + at + n);
      at += n;
    }
  if (at != bytes.size()) throw corrupt();
}

} // namespace poplar_host
