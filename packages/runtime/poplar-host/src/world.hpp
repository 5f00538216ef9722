// The processes of a distributed run (several processes, started by mpirun,
// each running the same program built for all the replicas and executing its
// own share of them). Exchanges go through the MPI shim (mpi/tilegraph_mpi.h),
// loaded with dlopen: poplar-host never links libmpi.
#ifndef poplar_host_world_hpp
#define poplar_host_world_hpp

#include <cstddef>

namespace poplar_host {

struct World {
  unsigned process = 0, processes = 1;
  bool distributed() const { return processes > 1; }
  /// Every process calls these in the same order with the same sizes; they fail
  /// (poplar::runtime_error) after TILEGRAPH_COLLECTIVE_TIMEOUT seconds without the others.
  /// all: processes x bytes, in process order.
  void allgather(const void *mine, std::size_t bytes, void *all);
  void broadcast(void *data, std::size_t bytes, unsigned root);
  /// After an error that leaves the processes out of step: at exit, end them all
  /// instead of finalising MPI (which would wait for the others).
  void broken();
};

/// The run's processes, read from the environment at the first call
/// (TILEGRAPH_NUM_PROCESSES, TILEGRAPH_PROCESS_ID, TILEGRAPH_MPI_LIBRARY,
/// TILEGRAPH_DISTRIBUTED_FINGERPRINT, TILEGRAPH_COLLECTIVE_TIMEOUT). Without
/// TILEGRAPH_NUM_PROCESSES, or with 1, one process runs every replica.
World &world();

} // namespace poplar_host

#endif
