// The engine: compiles a graph (checks, memory per tile, vertex binding
// plans) and runs its programs. Each replica has its own copy of every
// variable and of every vertex; replicas run on threads and meet at
// collectives. A compute set runs as one BSP superstep: all its vertices
// gather their inputs into private buffers, then compute, then their outputs
// are scattered back (parts that are safe to are read and written where they
// lie: see vertexplan.hpp). On a multi-IPU replica, consecutive one-IPU children of
// a Sequence run one thread per IPU (see ipusets.hpp). In a distributed run
// this process runs only its share of the replicas (see distributed.hpp).
#include "distributed.hpp"
#include "engine_options.hpp"
#include "gemm.hpp"
#include "internal.hpp"
#include "ipusets.hpp"
#include "liveness.hpp"
#include "profile.hpp"
#include "vertexplan.hpp"
#include "world.hpp"

#include <poplar/Engine.hpp>
#include <poplar/exceptions.hpp>

#include <algorithm>
#include <atomic>
#include <cfenv>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <iostream>
#include <mutex>
#include <set>
#include <thread>
#include <unordered_map>

namespace poplar_host {

using Kind = ProgramNode::Kind;

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

namespace {

/// The CPU's exception flags as tile flags.
unsigned cpuFpFlags() {
  const int f = std::fetestexcept(FE_INVALID | FE_DIVBYZERO | FE_OVERFLOW);
  return ((f & FE_INVALID) ? kFpInvalid : 0u) | ((f & FE_DIVBYZERO) ? kFpDivZero : 0u) |
         ((f & FE_OVERFLOW) ? kFpOverflow : 0u);
}

/// Makes `half` round as a tile does while a vertex runs.
class ArithmeticScope {
public:
  explicit ArithmeticScope(TileArithmetic *a) : saved_(tileArithmetic) { tileArithmetic = a; }
  ~ArithmeticScope() { tileArithmetic = saved_; }
  ArithmeticScope(const ArithmeticScope &) = delete;
  ArithmeticScope &operator=(const ArithmeticScope &) = delete;

private:
  TileArithmetic *saved_;
};

void checkTensorOfGraph(const GraphState &s, const poplar::Tensor &t, const char *what) {
  if (!t.valid()) return;
  if (impl(t).graph != &s) throw poplar::graph_program_compilation_error(message(what, " uses a tensor of another graph"));
}

/// A host function call's tensors match the function's arguments in type and size.
void checkHostCall(const GraphState &s, const ProgramNode &n) {
  if (n.id >= s.hostFunctions.size()) throw poplar::graph_program_compilation_error("Call of an unknown host function");
  const auto &f = s.hostFunctions[n.id];
  if (n.count != f.inputs.size() || n.touches.size() - n.count != f.outputs.size())
    throw poplar::graph_program_compilation_error(message("Call of host function '", f.handle, "' with ", n.count, " inputs and ",
                                                          n.touches.size() - n.count, " outputs; it takes ", f.inputs.size(),
                                                          " and ", f.outputs.size()));
  for (std::size_t i = 0; i < n.touches.size(); ++i) {
    const bool in = i < n.count;
    const auto &arg = in ? f.inputs[i] : f.outputs[i - n.count];
    const auto &t = impl(n.touches[i]);
    if (t.type != arg.first || t.numElements != arg.second)
      throw poplar::graph_program_compilation_error(message("Call of host function '", f.handle, "': ", in ? "input " : "output ",
                                                            in ? i : i - n.count, " is ", t.type, shapeString(t.shape), " but the function takes ",
                                                            arg.second, " ", arg.first, " elements"));
  }
}

/// Walks a program tree: checks references and collects compute sets and
/// functions. Programs may share sub-programs but not contain themselves.
void walkProgram(const GraphState &s, const std::shared_ptr<ProgramNode> &n, std::set<unsigned> &computeSets,
                 std::set<unsigned> &functions, std::set<const ProgramNode *> &done,
                 std::set<const ProgramNode *> &active) {
  if (active.count(n.get())) throw poplar::graph_cycle_error("a program contains itself");
  if (done.count(n.get())) return;
  active.insert(n.get());
  switch (n->kind) {
  case Kind::Execute:
    if (n->id >= s.computeSets.size()) throw poplar::graph_program_compilation_error("Execute of an unknown compute set");
    computeSets.insert(n->id);
    break;
  case Kind::CopyFromStream:
  case Kind::CopyToStream:
    if (n->id >= s.streams.size()) throw poplar::graph_program_compilation_error("Copy with a stream of another graph");
    break;
  case Kind::HostCall: checkHostCall(s, *n); break;
  case Kind::Call:
    if (n->id >= s.functions.size()) throw poplar::graph_program_compilation_error("Call of an unknown function");
    functions.insert(n->id);
    walkProgram(s, s.functions[n->id].getNode(), computeSets, functions, done, active);
    break;
  default: break;
  }
  checkTensorOfGraph(s, n->src, "a program");
  checkTensorOfGraph(s, n->dst, "a program");
  for (const auto &c : n->children) walkProgram(s, c, computeSets, functions, done, active);
  active.erase(n.get());
  done.insert(n.get());
}

std::shared_ptr<CompiledGraph> compile(const poplar::Graph &graph, poplar::ArrayRef<poplar::program::Program> progs,
                                       const poplar::OptionFlags &opts) {
  const auto &s = state(graph);
  auto cg = std::make_shared<CompiledGraph>();
  cg->graph = graph.getState();
  cg->target = s.target;
  cg->replicas = s.replicationFactor;
  cg->vars.reserve(s.vars.size());
  for (const auto &v : s.vars) { // everything but the tile mapping, which only compile needs
    VarInfo c;
    c.name = v.name;
    c.type = v.type;
    c.numElements = v.numElements;
    c.isConstant = v.isConstant;
    c.constData = v.constData;
    c.initData = v.initData;
    cg->vars.push_back(std::move(c));
  }
  cg->streams = s.streams;
  cg->hostFunctions = s.hostFunctions;
  cg->hostHandles = s.hostHandles;
  cg->options = opts;
  const poplar::OptionFlags effective = withEnvironmentOptions(opts);
  cg->numVertices = s.vertices.size();

  // Every variable and constant must be mapped completely.
  for (const auto &v : s.vars) {
    if (v.numElements == 0) continue;
    if (v.tile.empty() || std::find(v.tile.begin(), v.tile.end(), -1) != v.tile.end())
      throw poplar::invalid_graph(message("Tensor ", v.name, " has no tile mapping"));
  }

  std::set<unsigned> usedComputeSets, usedFunctions;
  std::set<const ProgramNode *> done, active;
  for (const auto &p : progs) {
    cg->programs.push_back(p.getNode());
    walkProgram(s, p.getNode(), usedComputeSets, usedFunctions, done, active);
  }
  for (const auto &f : s.functions) cg->functions.push_back(f.getNode());

  // Vertices: tile, fields, and their share of tile memory.
  const unsigned numTiles = s.target.getNumTiles();
  // Tensors by liveness; vertex state is always live.
  const TileMemory mem = planTileMemory(s, cg->programs);
  cg->tileBytes = mem.total();
  cg->alwaysLiveBytes = mem.alwaysLive;
  for (unsigned cs = 0; cs < s.computeSets.size(); ++cs) {
    ComputeSetPlan plan;
    plan.name = s.computeSets[cs].name;
    for (unsigned id : s.computeSets[cs].vertices) {
      const auto &v = s.vertices[id];
      if (v.tile < 0)
        throw poplar::invalid_tile_mapping(message("Vertex ", id, " ('", v.typeName, "' in compute set '", plan.name,
                                                   "') has no tile mapping"));
      VertexPlan vp = planVertex(s, id);
      cg->tileBytes[static_cast<std::size_t>(v.tile)] += vertexStateBytes(vp);
      cg->alwaysLiveBytes[static_cast<std::size_t>(v.tile)] += vertexStateBytes(vp);
      plan.fieldBytes += vp.fieldBytes;
      plan.tiles.push_back(vp.tile);
      plan.vertices.push_back(std::move(vp));
    }
    planInPlace(plan, cg->vars);
    std::sort(plan.tiles.begin(), plan.tiles.end());
    plan.tiles.erase(std::unique(plan.tiles.begin(), plan.tiles.end()), plan.tiles.end());
    if (usedComputeSets.count(cs)) cg->computeSets[cs] = std::move(plan);
  }
  cg->sequencePlans = planIpuConcurrency(s, cg->programs);

  if (effective.get("debug.allowOutOfMemory", "false") != "true") {
    const std::uint64_t limit = s.target.getBytesPerTile();
    for (unsigned t = 0; t < numTiles; ++t)
      if (cg->tileBytes[t] > limit)
        throw poplar::graph_memory_allocation_error(message("Out of memory on tile ", t, ": ", cg->tileBytes[t],
                                                            " bytes used but tiles only have ", limit,
                                                            " bytes of memory"));
  }
  return cg;
}

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
thread_local Lane *currentLane = nullptr;

} // namespace

// --- runtime -----------------------------------------------------------------------

class EngineRuntime {
public:
  EngineRuntime(std::shared_ptr<CompiledGraph> cg, poplar::OptionFlags opts)
      : cg_(std::move(cg)), opts_(std::move(opts)), local_(localReplicas(cg_->replicas)) {
    const unsigned r = cg_->replicas;
    data_.resize(r);
    for (auto &replica : data_) {
      replica.resize(cg_->vars.size());
      for (std::size_t v = 0; v < cg_->vars.size(); ++v)
        if (!cg_->vars[v].isConstant) replica[v].assign(cg_->vars[v].numElements * cg_->vars[v].type.size(), 0);
    }
    for (const auto &kv : cg_->computeSets) {
      auto &perReplica = instances_[kv.first];
      perReplica.resize(r);
      for (unsigned rep = local_.begin; rep < local_.end; ++rep) // only this process's replicas run
        for (const auto &vp : kv.second.vertices) perReplica[rep].push_back(makeVertexInstance(vp, [&](unsigned v) { return varPtr(rep, v); }));
    }
    streams_.resize(cg_->streams.size());
    copyCount_.assign(r, std::vector<std::size_t>(cg_->streams.size(), 0));
    lanePools_.resize(r);
    const poplar::OptionFlags effective = withEnvironmentOptions(opts_);
    initialMode_ = initialFpMode(effective);
    initialSeed_ = initialSeed(effective);
    profile_ = EngineProfiler::create(profileGraph(), effective);
    if (profile_ && profile_->measuring()) timing_ = profile_.get();
    numberHostSteps();
    resetNumerics();
  }

  const CompiledGraph &compiled() const { return *cg_; }
  RemoteMemory &remote() { return remote_; }
  EngineProfiler *timing() { return timing_; }
  /// Engine::enable/disable/resetExecutionProfile.
  void measureRuns(bool on) {
    if (on && !(profile_ && profile_->measuring()))
      throw poplar::runtime_error("enableExecutionProfiling: the engine was made without execution profiling "
                                  "(engine option autoReport.all or autoReport.outputExecutionProfile)");
    timing_ = on ? profile_.get() : nullptr;
  }
  void resetMeasurements() {
    if (profile_ && profile_->measuring()) profile_->reset();
  }
  const poplar::OptionFlags &options() const { return opts_; }
  const LocalReplicas &local() const { return local_; }

  void load(const poplar::Device &device) {
    const auto &dt = device.getTarget();
    const std::size_t need = std::size_t(cg_->target.getNumTiles()) * cg_->replicas;
    if (dt.getNumTiles() < need)
      throw poplar::poplar_error(message("Engine::load: the device has ", dt.getNumIPUs(), " IPUs (", dt.getNumTiles(),
                                         " tiles) but the graph needs ", cg_->replicas, " replicas of ",
                                         cg_->target.getNumTiles(), " tiles"));
    // Variables start as zero or their initial values.
    for (auto &replica : data_)
      for (std::size_t v = 0; v < cg_->vars.size(); ++v) {
        const auto &info = cg_->vars[v];
        if (info.isConstant) continue;
        if (info.initData.empty()) std::fill(replica[v].begin(), replica[v].end(), 0);
        else replica[v] = info.initData;
      }
    remote_.load(*cg_->graph, cg_->replicas);
    resetNumerics();
    loaded_ = true;
    shareState_ = local_.distributed;
    if (profile_) profile_->loaded();
  }

  void run(unsigned prog) {
    if (!loaded_) throw poplar::runtime_error("Engine::run called before Engine::load");
    if (prog >= cg_->programs.size())
      throw poplar::index_error(message("Engine::run: program ", prog, " does not exist (the engine has ",
                                        cg_->programs.size(), ")"));
    if (!local_.distributed) return runReplicas(prog);
    try {
      if (shareState_) broadcastState(data_, cg_->vars, remote_);
      shareState_ = false;
      runReplicas(prog);
    } catch (...) {
      world().broken(); // the other processes cannot continue without this one
      throw;
    }
  }

  /// Runs this process's replicas, one thread each (inline when it has one).
  void runReplicas(unsigned prog) {
    const unsigned r = local_.count();
    barrier_ = std::make_unique<ReplicaBarrier>(r);
    contributions_.assign(cg_->replicas, {});
    collectives_ = 0;
    const ProgramNode &root = *cg_->programs[prog];
    if (timing_) timing_->beginRun(prog);
    if (r == 1) {
      exec(root, local_.begin);
      if (timing_) timing_->endRun();
      return;
    }
    std::vector<std::exception_ptr> errors(r);
    std::vector<std::thread> threads;
    threads.reserve(r);
    for (unsigned i = 0; i < r; ++i)
      threads.emplace_back([&, i] {
        try {
          exec(root, local_.begin + i);
          barrier_->finish();
        } catch (const ReplicaBarrier::Aborted &) {
          barrier_->finish();
        } catch (...) {
          errors[i] = std::current_exception();
          barrier_->abort();
        }
      });
    for (auto &t : threads) t.join();
    for (auto &e : errors)
      if (e) std::rethrow_exception(e);
    if (barrier_->diverged())
      throw poplar::runtime_error("replicas took different paths through the program: a collective was reached "
                                  "by only some replicas");
    if (timing_) timing_->endRun();
  }

  void connectStream(const std::string &handle, void *begin, void *end) {
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

  void connectStream(const std::string &handle, void *p) {
    const unsigned id = streamId(handle);
    connectStream(handle, p, static_cast<std::uint8_t *>(p) + copyBytes(id));
  }

  void connectHostFunction(const std::string &handle, unsigned replica, poplar::HostCallbackHandle::Fn f) {
    const auto &fs = cg_->hostFunctions;
    const auto it = std::find_if(fs.begin(), fs.end(), [&](const HostFunctionInfo &x) { return x.handle == handle; });
    if (it == fs.end()) throw poplar::stream_connection_error(message("connectHostFunction('", handle, "'): no host function of that handle"));
    if (replica >= cg_->replicas)
      throw poplar::stream_connection_error(message("connectHostFunction('", handle, "'): replica ", replica, " does not exist"));
    hostFunctions_[{static_cast<unsigned>(it - fs.begin()), replica}] = std::move(f);
  }

  void connectCallback(const std::string &handle, std::function<void(void *)> f, int replica) {
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

  void hostTransfer(const std::string &handle, std::uint8_t *buf, std::size_t bytes, bool write) {
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

  void hostTransfer(const std::string &handle, std::uint8_t *buf, bool write) {
    auto it = cg_->hostHandles.find(handle);
    if (it == cg_->hostHandles.end())
      throw poplar::poplar_error(message("no host handle '", handle, "'"));
    const auto &t = impl(it->second.tensor);
    hostTransfer(handle, buf, t.numElements * t.type.size() * cg_->replicas, write);
  }

  void setPrintStream(std::ostream &os) { print_ = &os; }

  std::vector<std::string> listStreams() const {
    std::vector<std::string> out;
    for (const auto &s : cg_->streams) out.push_back(s.handle);
    return out;
  }

private:
  // --- memory --------------------------------------------------------------------
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

  ReplicaContext context(unsigned replica) {
    ReplicaContext ctx;
    ctx.replica = replica;
    ctx.numReplicas = cg_->replicas;
    ctx.varData = [this, replica](unsigned var) { return varPtr(replica, var); };
    ctx.fpModes = fp_[replica].data();
    ctx.hwSeeds = seeds_[replica].data();
    ctx.numTiles = fp_[replica].size();
    ctx.threads = spareThreads();
    return ctx;
  }

  // --- floating-point behaviour ----------------------------------------------------
  // A tile's generator state is seeds_[replica][tile]: a vertex or PopLibs step draws its
  // stochastic rounding from it (and its own number), and the state advances after every
  // compute set or step that rounded stochastically on the tile. Reseeding restarts it.

  /// Every tile of every replica as the engine options leave it.
  void resetNumerics() {
    const std::size_t tiles = cg_->target.getNumTiles();
    fp_.assign(cg_->replicas, std::vector<FpMode>(tiles, initialMode_));
    seeds_.assign(cg_->replicas, std::vector<std::uint64_t>(tiles, 0));
    for (unsigned r = 0; r < cg_->replicas; ++r)
      for (std::size_t t = 0; t < tiles; ++t) seeds_[r][t] = mix64(mix64(initialSeed_ ^ mix64(r)) + t);
  }

  void advanceGenerator(unsigned replica, unsigned tile) {
    if (fp_[replica][tile].esr) seeds_[replica][tile] = mix64(seeds_[replica][tile]);
  }

  /// What the profile describes: the programs, memory per tile, and each executed compute
  /// set's estimated cycles (its slowest tile's vertex perf estimates, one after another, plus
  /// a sync; tiles run side by side).
  ProfileGraph profileGraph() const {
    ProfileGraph p;
    p.target = cg_->target;
    p.replicas = cg_->replicas;
    p.graph = cg_->graph.get();
    p.programs = cg_->programs;
    p.functions = cg_->functions;
    p.tileBytes = cg_->tileBytes;
    p.alwaysLiveBytes = cg_->alwaysLiveBytes;
    for (const auto &kv : cg_->computeSets) {
      ProfileGraph::ComputeSet c;
      c.id = kv.first;
      c.vertices = kv.second.vertices.size();
      c.tiles = kv.second.tiles.size();
      std::map<unsigned, std::uint64_t> perTile;
      for (const auto &vp : kv.second.vertices) {
        const std::uint64_t e = cg_->graph->vertices[vp.id].perfEstimate;
        if (e == 0) ++c.unestimated;
        perTile[vp.tile] += e;
      }
      std::uint64_t slowest = 0;
      for (const auto &t : perTile) slowest = std::max(slowest, t.second);
      c.cycles = slowest + kSyncCycles;
      p.computeSets.push_back(c);
    }
    return p;
  }

  /// Host steps get numbers in program order, so that their stochastic rounding does not
  /// depend on where they sit in memory.
  void numberHostSteps() {
    std::set<const ProgramNode *> seen;
    std::function<void(const ProgramNode &)> walk = [&](const ProgramNode &n) {
      if (!seen.insert(&n).second) return;
      if (n.kind == Kind::HostStep) stepIds_.emplace(&n, stepIds_.size());
      for (const auto &c : n.children) walk(*c);
    };
    for (const auto &p : cg_->programs) walk(*p);
    for (const auto &f : cg_->functions) walk(*f);
  }

  /// Distinguishes a host step from the others rounding on the same tile.
  std::uint64_t stepKey(const ProgramNode &n) {
    std::lock_guard<std::mutex> lock(stepMutex_);
    const auto id = stepIds_.emplace(&n, stepIds_.size()).first->second; // steps added after the engine was made
    return mix64(id + 1);
  }

  std::string fpExceptionMessage(unsigned flags, const std::string &where, unsigned tile, unsigned replica) const {
    return message("floating point exception (", fpFlagNames(flags), ") in ", where, " on tile ", tile,
                   cg_->replicas > 1 ? message(" of replica ", replica) : std::string());
  }

  // --- vertices ------------------------------------------------------------------
  /// Gathers the fields of vertices [begin, end) and runs them.
  void gatherAndCompute(std::vector<std::unique_ptr<VertexInstance>> &insts, std::size_t begin, std::size_t end,
                        unsigned replica) {
    for (std::size_t k = begin; k < end; ++k) {
      auto &inst = *insts[k];
      for (const auto &m : inst.gathers) gatherMove(m);
      const unsigned tile = inst.plan->tile;
      const FpMode &mode = fp_[replica][tile];
      if (mode.ieee()) {
        compute(inst);
        continue;
      }
      // the tile's behaviour: half rounds through `arith`; traps read the CPU's flags too
      TileArithmetic arith;
      arith.mode = mode;
      arith.rng = mix64(seeds_[replica][tile] ^ mix64(inst.plan->id));
      const unsigned traps = mode.traps();
      if (traps) std::feclearexcept(FE_ALL_EXCEPT);
      {
        ArithmeticScope scope(&arith);
        compute(inst);
      }
      const unsigned flags = (arith.flags | (traps ? cpuFpFlags() : 0u)) & traps;
      if (flags) throw poplar::application_runtime_error(fpExceptionMessage(flags, inst.plan->label, tile, replica));
    }
  }

  static void compute(VertexInstance &inst) {
    const VertexDesc &d = *inst.plan->desc;
    for (unsigned w = 0; w < d.numWorkers; ++w)
      if (!d.compute(inst.obj, w))
        throw poplar::application_runtime_error(message(inst.plan->label, " returned false from compute()",
                                                        d.multiVertex ? message(" on worker ", w) : std::string()));
  }

  void execute(unsigned cs, unsigned replica) {
    auto &insts = instances_.at(cs)[replica];
    // Vertices write only their own buffers, or parts no other vertex touches,
    // until the scatter below, so splitting gather+compute over threads keeps
    // the BSP semantics; large
    // compute sets of a single replica use the spare cores this way (unless
    // the IPUs already run on threads).
    const unsigned threads = spareThreads();
    if (threads > 1 && insts.size() >= 2 && cg_->computeSets.at(cs).fieldBytes >= kParallelBytes) {
      const std::size_t n = insts.size(), chunks = std::min<std::size_t>(threads, n);
      std::vector<std::exception_ptr> errors(chunks);
      std::vector<std::thread> pool;
      for (std::size_t c = 1; c < chunks; ++c)
        pool.emplace_back([&, c] {
          try {
            gatherAndCompute(insts, n * c / chunks, n * (c + 1) / chunks, replica);
          } catch (...) {
            errors[c] = std::current_exception();
          }
        });
      try {
        gatherAndCompute(insts, 0, n / chunks, replica);
      } catch (...) {
        errors[0] = std::current_exception();
      }
      for (auto &t : pool) t.join();
      for (auto &e : errors)
        if (e) std::rethrow_exception(e);
    } else {
      gatherAndCompute(insts, 0, insts.size(), replica);
    }
    for (auto &inst : insts)
      for (const auto &m : inst->scatters) scatterMove(m);
    for (unsigned tile : cg_->computeSets.at(cs).tiles) advanceGenerator(replica, tile);
  }

  // --- streams -------------------------------------------------------------------
  unsigned streamId(const std::string &handle) const {
    for (unsigned i = 0; i < cg_->streams.size(); ++i)
      if (cg_->streams[i].handle == handle) return i;
    throw poplar::stream_connection_error(message("no stream named '", handle, "'"));
  }
  bool broadcastStream(unsigned id) const {
    return cg_->streams[id].hostToDevice && cg_->streams[id].mode == poplar::ReplicatedStreamMode::BROADCAST;
  }
  std::size_t copyBytes(unsigned id) const {
    const auto &s = cg_->streams[id];
    return s.numElements * s.type.size() * (broadcastStream(id) ? 1 : cg_->replicas);
  }
  std::string copyDescription(unsigned id) const {
    const auto &s = cg_->streams[id];
    return message(broadcastStream(id) ? 1 : cg_->replicas, " replica(s) x ", s.numElements, " ", s.type);
  }

  void streamCopy(const ProgramNode &n, unsigned replica) {
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
    std::vector<std::uint8_t> tmp(per);
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
  void hostCall(const ProgramNode &n, unsigned replica) {
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
  void printTensor(const ProgramNode &n, unsigned replica) {
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

  // --- collectives ---------------------------------------------------------------
  void collective(const ProgramNode &n, unsigned replica) {
    auto ctx = context(replica);
    contributions_[replica] = ctx.read(n.src);
    barrier_->wait();
    if (local_.distributed) { // one thread exchanges for all local replicas
      if (replica == local_.begin) exchangeContributions(contributions_, local_, collectives_++);
      barrier_->wait();
    }
    std::vector<const std::vector<double> *> group;
    unsigned rank = 0;
    bool found = false;
    for (const auto &g : n.groups) {
      for (unsigned i = 0; i < g.size(); ++i)
        if (g[i] == replica) {
          rank = i;
          found = true;
        }
      if (found) {
        for (unsigned member : g) group.push_back(&contributions_[member]);
        break;
      }
    }
    if (!found) throw poplar::runtime_error(message("replica ", replica, " is in no group of a collective"));
    auto result = n.combine(group, rank);
    ctx.write(n.dst, result);
    if (ctx.roundedTile >= 0) advanceGenerator(replica, static_cast<unsigned>(ctx.roundedTile));
    barrier_->wait();
    if (ctx.trapped)
      throw poplar::application_runtime_error(fpExceptionMessage(ctx.trapped, "a collective", ctx.trappedTile, replica));
  }

  // --- IPUs on threads ------------------------------------------------------------
  void sequence(const ProgramNode &n, unsigned replica) {
    const SequencePlan *plan = nullptr;
    if (ipuThreads_ && !currentLane) {
      auto it = cg_->sequencePlans.find(&n);
      // a Sequence extended after the engine was made runs as written
      if (it != cg_->sequencePlans.end() && it->second.numChildren == n.children.size()) plan = &it->second;
    }
    std::size_t i = 0;
    if (plan)
      for (const auto &run : plan->runs) {
        for (; i < run.begin; ++i) exec(*n.children[i], replica);
        runLanes(n, run, replica);
        i = run.end;
      }
    for (; i < n.children.size(); ++i) exec(*n.children[i], replica);
  }

  /// Runs each lane (one IPU's children) on its own thread. Lanes touch
  /// disjoint IPUs, streams and remote buffers, so only prints need ordering.
  /// A failure is reported as the sequential run would: the earliest child's.
  void runLanes(const ProgramNode &seq, const ParallelRun &run, unsigned replica) {
    const std::size_t k = run.lanes.size();
    std::vector<Lane> lanes(k);
    std::vector<std::exception_ptr> errors(seq.children.size());
    std::atomic<std::size_t> firstFailure{SIZE_MAX};
    auto work = [&](std::size_t l) {
      Lane *outer = currentLane;
      currentLane = &lanes[l];
      lanes[l].engine = this;
      for (std::size_t i : run.lanes[l]) {
        if (i > firstFailure.load()) break; // the sequential run would have stopped before it
        lanes[l].child = i;
        try {
          exec(*seq.children[i], replica);
        } catch (...) {
          errors[i] = std::current_exception();
          for (auto f = firstFailure.load(); i < f && !firstFailure.compare_exchange_weak(f, i);) {}
          break;
        }
      }
      currentLane = outer;
    };
    if (!lanePools_[replica]) lanePools_[replica] = std::make_unique<TaskPool>(); // only this replica's thread uses it
    lanePools_[replica]->run(k, work);
    std::vector<std::pair<std::size_t, std::string>> prints;
    for (auto &lane : lanes) prints.insert(prints.end(), lane.prints.begin(), lane.prints.end());
    if (!prints.empty()) {
      std::stable_sort(prints.begin(), prints.end(), [](const auto &a, const auto &b) { return a.first < b.first; });
      std::lock_guard<std::mutex> lock(printMutex_);
      for (const auto &p : prints) (*print_) << p.second;
      (*print_) << std::flush;
    }
    if (firstFailure.load() != SIZE_MAX) std::rethrow_exception(errors[firstFailure.load()]);
  }

  // --- the interpreter -----------------------------------------------------------
  bool predicate(const poplar::Tensor &t, unsigned replica) { return context(replica).read(t)[0] != 0.0; }

  /// Runs a node; the first local replica's are timed when the engine measures runs (profile.hpp).
  void exec(const ProgramNode &n, unsigned replica) {
    if (!timing_ || replica != local_.begin) return execNode(n, replica);
    const auto t0 = EngineProfiler::now();
    execNode(n, replica);
    timing_->step(n, t0);
  }

  void execNode(const ProgramNode &n, unsigned replica) {
    switch (n.kind) {
    case Kind::Sequence: sequence(n, replica); return;
    case Kind::Execute: execute(n.id, replica); return;
    case Kind::CopyTensor: {
      const auto &s = impl(n.src), &d = impl(n.dst);
      std::vector<std::uint8_t> tmp(s.numElements * s.type.size());
      gather(replica, s.regions, s.type.size(), tmp.data());
      scatter(replica, d.regions, d.type.size(), tmp.data());
      return;
    }
    case Kind::CopyFromStream:
    case Kind::CopyToStream: streamCopy(n, replica); return;
    case Kind::Repeat:
      for (unsigned i = 0; i < n.count; ++i) exec(*n.children[0], replica);
      return;
    case Kind::RepeatWhile:
      exec(*n.children[0], replica);
      while (predicate(n.src, replica) == n.flag) {
        exec(*n.children[1], replica);
        exec(*n.children[0], replica);
      }
      return;
    case Kind::If: exec(*n.children[predicate(n.src, replica) ? 0 : 1], replica); return;
    case Kind::Switch: {
      const auto value = static_cast<long long>(context(replica).read(n.src)[0]);
      for (std::size_t i = 0; i < n.caseValues.size(); ++i)
        if (n.caseValues[i] == value) {
          exec(*n.children[i], replica);
          return;
        }
      exec(*n.children.back(), replica);
      return;
    }
    case Kind::Print: printTensor(n, replica); return;
    case Kind::Call: exec(*cg_->functions[n.id], replica); return;
    case Kind::HostCall: hostCall(n, replica); return;
    case Kind::HostStep: {
      auto ctx = context(replica);
      ctx.stepKey = stepKey(n);
      {
        const GemmThreads products(ctx.threads);
        n.hostStep(ctx);
      }
      if (ctx.roundedTile >= 0) advanceGenerator(replica, static_cast<unsigned>(ctx.roundedTile));
      if (ctx.trapped)
        throw poplar::application_runtime_error(fpExceptionMessage(ctx.trapped, n.text, ctx.trappedTile, replica));
      return;
    }
    case Kind::Collective: collective(n, replica); return;
    case Kind::Abort: throw poplar::application_runtime_error(n.text);
    case Kind::Nop: return;
    case Kind::CopyToRemote:
    case Kind::CopyFromRemote: remote_.copy(n, context(replica)); return;
    }
  }

  std::shared_ptr<CompiledGraph> cg_;
  poplar::OptionFlags opts_;
  std::vector<std::vector<std::vector<std::uint8_t>>> data_; ///< [replica][var]
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

  static unsigned defaultComputeThreads() {
    if (const char *env = std::getenv("POPLAR_HOST_THREADS")) {
      const long v = std::strtol(env, nullptr, 10);
      if (v >= 1) return static_cast<unsigned>(std::min(v, 64L));
    }
    return std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
  }
};

RemoteMemory &remoteMemory(EngineRuntime &rt) { return rt.remote(); }
const LocalReplicas &localReplicasOf(EngineRuntime &rt) { return rt.local(); }
EngineProfiler *runProfiler(EngineRuntime &rt) { return rt.timing(); }
const GraphState &graphOf(EngineRuntime &rt) { return *rt.compiled().graph; }

std::string fpFlagNames(unsigned flags) {
  std::string out;
  auto add = [&](unsigned f, const char *name) {
    if (!(flags & f)) return;
    if (!out.empty()) out += ", ";
    out += name;
  };
  add(kFpInvalid, "invalid operation");
  add(kFpDivZero, "divide by zero");
  add(kFpOverflow, "overflow");
  return out;
}

} // namespace poplar_host

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
  Executable exe(compile(graph, progs, opt));
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
