// The engine's part of a distributed run (see world.hpp): each process runs
// its own consecutive share of the replicas, and these exchanges keep the
// results as one process running every replica would compute them.
#ifndef poplar_host_distributed_hpp
#define poplar_host_distributed_hpp

#include "internal.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace poplar_host {

/// The replicas [begin, end) this process runs.
struct LocalReplicas {
  unsigned begin = 0, end = 1;
  bool distributed = false;
  unsigned count() const { return end - begin; }
  bool has(unsigned replica) const { return replica >= begin && replica < end; }
};

/// This process's share of `replicas` (all of them unless the run is distributed).
LocalReplicas localReplicas(unsigned replicas);

/// A collective: `contributions` holds this process's replicas' data; afterwards every
/// replica's. `ordinal` counts the run's collectives, to catch processes that diverged.
void exchangeContributions(std::vector<std::vector<double>> &contributions, const LocalReplicas &local,
                           std::uint64_t ordinal);

/// The first run after Engine::load: every replica's variables ([replica][var]) and
/// remote buffers as process 0 has them.
void broadcastState(std::vector<std::vector<DeviceBytes>> &data, const std::vector<VarInfo> &vars,
                    RemoteMemory &remote);

/// readTensor: `buf` holds one slice of `per` bytes for each replica; the slices of
/// other processes' replicas are replaced by theirs.
void shareReplicaSlices(std::uint8_t *buf, std::size_t per, const LocalReplicas &local);

/// copyFromRemoteBuffer: the row read for `replica`, from the process that runs it.
void shareReplicaRow(std::uint8_t *buf, std::size_t bytes, unsigned replica, const LocalReplicas &local);

class EngineRuntime;
const LocalReplicas &localReplicasOf(EngineRuntime &rt);

} // namespace poplar_host

#endif
