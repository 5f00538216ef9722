// Loading and running an engine: the replicas on threads, the program interpreter,
// collectives and the IPUs of a replica on threads (see engine_runtime.hpp).
#include "engine_options.hpp"
#include "engine_runtime.hpp"
#include "gemm.hpp"
#include "world.hpp"

#include <poplar/exceptions.hpp>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <exception>
#include <thread>

namespace poplar_host {

using Kind = ProgramNode::Kind;

thread_local Lane *currentLane = nullptr;

EngineRuntime::EngineRuntime(std::shared_ptr<CompiledGraph> cg, poplar::OptionFlags opts)
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

void EngineRuntime::measureRuns(bool on) {
  if (on && !(profile_ && profile_->measuring()))
    throw poplar::runtime_error("enableExecutionProfiling: the engine was made without execution profiling "
                                "(engine option autoReport.all or autoReport.outputExecutionProfile)");
  timing_ = on ? profile_.get() : nullptr;
}

void EngineRuntime::resetMeasurements() {
  if (profile_ && profile_->measuring()) profile_->reset();
}

void EngineRuntime::load(const poplar::Device &device) {
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

void EngineRuntime::run(unsigned prog) {
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

void EngineRuntime::runReplicas(unsigned prog) {
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

ReplicaContext EngineRuntime::context(unsigned replica) {
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

/// What the profile describes: the programs, memory per tile, and each executed compute
/// set's estimated cycles (its slowest tile's vertex perf estimates, one after another, plus
/// a sync; tiles run side by side).
ProfileGraph EngineRuntime::profileGraph() const {
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

// --- the interpreter -----------------------------------------------------------
bool EngineRuntime::predicate(const poplar::Tensor &t, unsigned replica) { return context(replica).read(t)[0] != 0.0; }

/// Runs a node; the first local replica's are timed when the engine measures runs (profile.hpp).
void EngineRuntime::exec(const ProgramNode &n, unsigned replica) {
  if (!timing_ || replica != local_.begin) return execNode(n, replica);
  const auto t0 = EngineProfiler::now();
  execNode(n, replica);
  timing_->step(n, t0);
}

void EngineRuntime::execNode(const ProgramNode &n, unsigned replica) {
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

// --- collectives ---------------------------------------------------------------
void EngineRuntime::collective(const ProgramNode &n, unsigned replica) {
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
void EngineRuntime::sequence(const ProgramNode &n, unsigned replica) {
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
void EngineRuntime::runLanes(const ProgramNode &seq, const ParallelRun &run, unsigned replica) {
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

unsigned EngineRuntime::defaultComputeThreads() {
  if (const char *env = std::getenv("POPLAR_HOST_THREADS")) {
    const long v = std::strtol(env, nullptr, 10);
    if (v >= 1) return static_cast<unsigned>(std::min(v, 64L));
  }
  return std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
}

RemoteMemory &remoteMemory(EngineRuntime &rt) { return rt.remote(); }
const LocalReplicas &localReplicasOf(EngineRuntime &rt) { return rt.local(); }
EngineProfiler *runProfiler(EngineRuntime &rt) { return rt.timing(); }
const GraphState &graphOf(EngineRuntime &rt) { return *rt.compiled().graph; }

} // namespace poplar_host
