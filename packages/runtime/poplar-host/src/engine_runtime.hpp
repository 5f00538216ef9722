// The engine: compiles a graph (checks, memory per tile, vertex binding
// plans) and runs its programs. Each replica has its own copy of every
// variable and of every vertex; replicas run on threads and meet at
// collectives. A compute set runs as one BSP superstep: all its vertices
// gather their inputs into private buffers, then compute, then their outputs
// are scattered back (parts that are safe to are read and written where they
// lie: see vertexplan.hpp). On a multi-IPU replica, consecutive one-IPU children of
// a Sequence run one thread per IPU (see ipusets.hpp). In a distributed run
// this process runs only its share of the replicas (see distributed.hpp).
//
// EngineRuntime's members are defined by concern: EngineCompile.cpp (compiling a graph),
// EngineRuntime.cpp (loading, running, the interpreter, collectives, IPU threads),
// EngineComputeSets.cpp (running compute sets), EngineNumerics.cpp (floating-point
// modes and seeds), EngineHostIO.cpp (streams, host functions, tensor reads and
// writes, prints); Engine.cpp holds the public poplar::Engine API.
#ifndef poplar_host_engine_runtime_hpp
#define poplar_host_engine_runtime_hpp

#include "distributed.hpp"
#include "internal.hpp"
#include "ipusets.hpp"
#include "profile.hpp"
#include "vertexplan.hpp"

#include <poplar/Engine.hpp>

#include <condition_variable>
#include <cstring>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <iostream>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace poplar_host {

/// Everything an engine needs, fixed when the graph is compiled.
struct CompiledGraph {
  std::shared_ptr<GraphState> graph; ///< keeps tensors' graph pointers valid
  poplar::Target target;             ///< per replica
  unsigned replicas = 1;
  std::vector<VarInfo> vars; ///< snapshot (constants and initial values)
  std::vector<StreamInfo> streams;
  std::vector<HostFunctionInfo> hostFunctions;
  std::map<std::string, HostHandle> hostHandles;
  std::vector<std::shared_ptr<ProgramNode>> programs;
  std::vector<std::shared_ptr<ProgramNode>> functions;
  std::map<unsigned, ComputeSetPlan> computeSets; ///< those the programs execute
  SequencePlans sequencePlans;                    ///< Sequences with children to run one thread per IPU
  std::vector<std::uint64_t> tileBytes;           ///< peak memory per tile (one replica)
  std::vector<std::uint64_t> alwaysLiveBytes;     ///< of which always live
  std::size_t numVertices = 0;
  poplar::OptionFlags options;
};

/// Checks the graph and programs and plans memory and vertices (EngineCompile.cpp).
std::shared_ptr<CompiledGraph> compileForEngine(const poplar::Graph &graph,
                                                poplar::ArrayRef<poplar::program::Program> progs,
                                                const poplar::OptionFlags &opts);

/// A barrier for the replica threads that fails instead of hanging when a
/// replica has stopped (an error, or control flow that skipped a collective).
class ReplicaBarrier {
public:
  struct Aborted {};
  explicit ReplicaBarrier(unsigned n) : n_(n) {}
  void wait() {
    std::unique_lock<std::mutex> lock(m_);
    if (aborted_ || finished_ > 0) {
      if (!aborted_) diverged_ = true;
      aborted_ = true;
      cv_.notify_all();
      throw Aborted{};
    }
    const auto gen = generation_;
    if (++waiting_ == n_) {
      waiting_ = 0;
      ++generation_;
      cv_.notify_all();
      return;
    }
    cv_.wait(lock, [&] { return generation_ != gen || aborted_; });
    if (generation_ == gen) throw Aborted{};
  }
  /// A replica finished its program: anyone still waiting will wait forever.
  void finish() {
    std::lock_guard<std::mutex> lock(m_);
    ++finished_;
    if (waiting_ > 0) {
      diverged_ = true;
      aborted_ = true;
      cv_.notify_all();
    }
  }
  void abort() {
    std::lock_guard<std::mutex> lock(m_);
    aborted_ = true;
    cv_.notify_all();
  }
  bool diverged() const { return diverged_; }

private:
  std::mutex m_;
  std::condition_variable cv_;
  unsigned n_, waiting_ = 0, finished_ = 0;
  std::uint64_t generation_ = 0;
  bool aborted_ = false, diverged_ = false;
};

struct StreamConnection {
  std::uint8_t *begin = nullptr;
  std::size_t bytes = 0;
  std::function<void(void *)> callback;
  std::map<unsigned, std::function<void(void *)>> replicaCallbacks;
  bool connected = false;
};

/// The thread's IPU lane while it runs one (see EngineRuntime::runLanes):
/// prints are kept to be written in sequence order when the lanes join.
struct Lane {
  const void *engine = nullptr;
  std::size_t child = 0; ///< index of the running child in its Sequence
  std::vector<std::pair<std::size_t, std::string>> prints;
};
extern thread_local Lane *currentLane;

class EngineRuntime {
public:
  EngineRuntime(std::shared_ptr<CompiledGraph> cg, poplar::OptionFlags opts);

  const CompiledGraph &compiled() const { return *cg_; }
  RemoteMemory &remote() { return remote_; }
  EngineProfiler *timing() { return timing_; }
  /// Engine::enable/disable/resetExecutionProfile.
  void measureRuns(bool on);
  void resetMeasurements();
  const poplar::OptionFlags &options() const { return opts_; }
  const LocalReplicas &local() const { return local_; }

  void load(const poplar::Device &device);
  void run(unsigned prog);
  /// Runs this process's replicas, one thread each (inline when it has one).
  void runReplicas(unsigned prog);

  // host I/O (EngineHostIO.cpp)
  void connectStream(const std::string &handle, void *begin, void *end);
  void connectStream(const std::string &handle, void *p);
  void connectHostFunction(const std::string &handle, unsigned replica, poplar::HostCallbackHandle::Fn f);
  void connectCallback(const std::string &handle, std::function<void(void *)> f, int replica);
  void hostTransfer(const std::string &handle, std::uint8_t *buf, std::size_t bytes, bool write);
  void hostTransfer(const std::string &handle, std::uint8_t *buf, bool write);
  void setPrintStream(std::ostream &os) { print_ = &os; }
  std::vector<std::string> listStreams() const;

private:
  // --- memory (inline: every copy goes through these) ---------------------------
  std::uint8_t *varPtr(unsigned replica, unsigned var) {
    auto &info = cg_->vars[var];
    return info.isConstant ? info.constData.data() : data_[replica][var].data();
  }
  void gather(unsigned replica, const std::vector<Region> &regions, std::size_t es, std::uint8_t *dst) {
    for (const auto &r : regions) {
      std::memcpy(dst, varPtr(replica, r.var) + r.begin * es, r.size() * es);
      dst += r.size() * es;
    }
  }
  void scatter(unsigned replica, const std::vector<Region> &regions, std::size_t es, const std::uint8_t *src) {
    for (const auto &r : regions) {
      std::memcpy(varPtr(replica, r.var) + r.begin * es, src, r.size() * es);
      src += r.size() * es;
    }
  }
  ReplicaContext context(unsigned replica);

  // --- floating-point behaviour (EngineNumerics.cpp) ------------------------------
  void resetNumerics();
  void advanceGenerator(unsigned replica, unsigned tile);
  void numberHostSteps();
  std::uint64_t stepKey(const ProgramNode &n);
  std::string fpExceptionMessage(unsigned flags, const std::string &where, unsigned tile, unsigned replica) const;

  ProfileGraph profileGraph() const;

  // --- compute sets (EngineComputeSets.cpp) ---------------------------------------
  void gatherAndCompute(std::vector<std::unique_ptr<VertexInstance>> &insts, std::size_t begin, std::size_t end,
                        unsigned replica);
  static void compute(VertexInstance &inst);
  void execute(unsigned cs, unsigned replica);

  // --- streams, host functions and prints (EngineHostIO.cpp) ----------------------
  unsigned streamId(const std::string &handle) const;
  bool broadcastStream(unsigned id) const;
  std::size_t copyBytes(unsigned id) const;
  std::string copyDescription(unsigned id) const;
  void streamCopy(const ProgramNode &n, unsigned replica);
  void hostCall(const ProgramNode &n, unsigned replica);
  void printTensor(const ProgramNode &n, unsigned replica);

  // --- the interpreter, collectives and IPU threads (EngineRuntime.cpp) -----------
  void collective(const ProgramNode &n, unsigned replica);
  void sequence(const ProgramNode &n, unsigned replica);
  void runLanes(const ProgramNode &seq, const ParallelRun &run, unsigned replica);
  bool predicate(const poplar::Tensor &t, unsigned replica);
  void exec(const ProgramNode &n, unsigned replica);
  void execNode(const ProgramNode &n, unsigned replica);

  std::shared_ptr<CompiledGraph> cg_;
  poplar::OptionFlags opts_;
  std::vector<std::vector<DeviceBytes>> data_; ///< [replica][var]
  std::map<unsigned, std::vector<std::vector<std::unique_ptr<VertexInstance>>>> instances_; ///< [cs][replica][i]
  std::vector<StreamConnection> streams_;
  std::vector<std::vector<std::size_t>> copyCount_; ///< [replica][stream]
  std::unique_ptr<ReplicaBarrier> barrier_;
  std::vector<std::vector<double>> contributions_; ///< [replica], of the running collective
  LocalReplicas local_;                            ///< the replicas this process runs
  bool shareState_ = false;                        ///< the next run starts from process 0's state
  std::uint64_t collectives_ = 0;                  ///< exchanged in this run
  std::map<std::pair<unsigned, unsigned>, poplar::HostCallbackHandle::Fn> hostFunctions_; ///< [function, replica]
  std::mutex printMutex_, callbackMutex_;
  std::ostream *print_ = &std::cout;
  bool loaded_ = false;
  RemoteMemory remote_;
  FpMode initialMode_;
  std::uint64_t initialSeed_ = 0;
  std::vector<std::vector<FpMode>> fp_;            ///< [replica][tile]
  std::vector<std::vector<std::uint64_t>> seeds_;  ///< [replica][tile]
  std::mutex stepMutex_;
  std::unordered_map<const ProgramNode *, std::uint64_t> stepIds_;
  std::unique_ptr<EngineProfiler> profile_; ///< with the autoReport options only
  EngineProfiler *timing_ = nullptr;        ///< profile_ when it measures runs: nothing is timed without it
  /// Threads for one compute set of a single replica: the cores, at most 4,
  /// or POPLAR_HOST_THREADS (1 turns it off).
  unsigned computeThreads_ = defaultComputeThreads();
  /// One thread per IPU for the parallel runs of Sequences (see ipusets.hpp).
  bool ipuThreads_ = ipuThreadsEnabled();
  std::vector<std::unique_ptr<TaskPool>> lanePools_; ///< [replica], made at a replica's first parallel run
  /// Below this much field data a compute set runs on one thread (starting
  /// threads costs more than it saves).
  static constexpr std::size_t kParallelBytes = 1 << 20;

  /// Threads a compute set or a step may split its work over: the cores, unless replicas or IPUs
  /// already run on threads of their own.
  unsigned spareThreads() const { return local_.count() == 1 && !currentLane ? computeThreads_ : 1; }

  static unsigned defaultComputeThreads();
};

} // namespace poplar_host

#endif
