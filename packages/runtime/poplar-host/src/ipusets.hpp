// Which IPUs each program touches, and how the children of a Sequence can run
// one thread per IPU. On a multi-IPU device each IPU runs its own part of the
// control program: consecutive children of a Sequence that each involve one
// IPU's tiles run at the same time on their IPUs; a child that involves
// several IPUs (an inter-IPU copy, a collective, an abort) makes them all
// wait for each other. The engine mirrors that with threads. PopLibs calls
// (host steps here) are compute sets on the IPU: they touch the IPUs of the
// tensors they list as read or written.
#ifndef poplar_host_ipusets_hpp
#define poplar_host_ipusets_hpp

#include "internal.hpp"

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

namespace poplar_host {

/// Children [begin, end) of a Sequence, split into lanes: each lane holds the
/// children (indices, in order) of one IPU, plus any children that touch no
/// IPU; lanes can run concurrently. There are always at least two lanes.
struct ParallelRun {
  std::size_t begin = 0, end = 0;
  std::vector<std::vector<std::size_t>> lanes;
};

/// The parallel runs of one Sequence, in order; children outside them run
/// one after another. Made for a Sequence of `numChildren` children.
struct SequencePlan {
  std::size_t numChildren = 0;
  std::vector<ParallelRun> runs;
};

/// Sequences (nodes of the programs or of functions they call) that have at
/// least one parallel run. A Sequence not listed runs its children in order.
using SequencePlans = std::unordered_map<const ProgramNode *, SequencePlan>;

/// Computes which IPUs every program node touches and plans the Sequences.
/// Per-IPU runs exclude children that share a stream or a remote buffer with
/// another lane (their order would matter), so the lanes never share state
/// the engine mutates. The graph must have passed the engine's compile checks.
SequencePlans planIpuConcurrency(const GraphState &s, const std::vector<std::shared_ptr<ProgramNode>> &programs);

/// Threads that run tasks side by side and sleep in between: starting a
/// thread per IPU for every step of a loop would cost more than the steps.
class TaskPool {
public:
  TaskPool() = default;
  TaskPool(const TaskPool &) = delete;
  TaskPool &operator=(const TaskPool &) = delete;
  ~TaskPool();
  /// Runs task(0), ..., task(n - 1) at the same time, task 0 on the caller's
  /// thread, and waits for them. Tasks must not throw. One caller at a time.
  void run(std::size_t n, const std::function<void(std::size_t)> &task);

private:
  void loop(std::size_t worker, std::uint64_t seen);
  std::mutex m_;
  std::condition_variable wake_, done_;
  std::vector<std::thread> threads_;
  const std::function<void(std::size_t)> *task_ = nullptr;
  std::size_t n_ = 0, pending_ = 0;
  std::uint64_t generation_ = 0;
  bool stop_ = false;
};

/// False when POPLAR_HOST_IPU_THREADS=0: every IPU then runs on the replica's
/// thread, one after another (for debugging).
bool ipuThreadsEnabled();

} // namespace poplar_host

#endif
